"""For people: the `delayed` command, the admin views, the queue metrics exporter and the dashboard;
they read and act on Redis only through delayed.protocol."""

package delayed

import (
	goredis "github.com/redis/go-redis/v9"
)

// Connect makes a go-redis client for the Redis a URL names, from the URL forms Python's
// delayed.connect takes, for NewQueueWithClient:
//
//   - redis://[user:password@]host[:port][/db]: one server (localhost, 6379 and 0 when left out);
//   - rediss://...: the same over TLS (the server's certificate and name verified);
//   - unix://[user:password@]/path/redis.sock[?db=N]: a unix socket;
//   - redis+cluster://[user:password@]host:port[,host:port...]: a Redis Cluster, found from any node
//     named (rediss+cluster://... over TLS); a queue on it needs a hash tag in its name ("{orders}");
//   - redis+sentinel://[user:password@]host:port[,host:port...]/MASTER_NAME[/db]: the primary the
//     sentinels name, followed through a failover; the user info is the data nodes', the
//     sentinel_username and sentinel_password query options the sentinels'.
//
// Query options are redis-py's: db, username, password, client_name, socket_timeout and
// socket_connect_timeout (seconds), max_connections, protocol; over TLS ssl_ca_certs, ssl_certfile,
// ssl_keyfile, ssl_cert_reqs (none, optional, required) and ssl_check_hostname. Those that tune only
// redis-py (socket_keepalive, health_check_interval, retry_on_timeout, ...) are taken and ignored.
//
// Like Python's, the client waits 10 s at most for a reply and 5 s for a connection, speaks RESP2,
// and never resends a command (MaxRetries -1): a resent enqueue whose reply was lost would enqueue
// twice. It connects on its first command. A URL it cannot use is a *RedisURLError, its passwords
// masked; "" is one (ConfiguredURL gives $DELAYED_REDIS_URL's).
func Connect(url string) (goredis.UniversalClient, error) {
	u, err := parseRedisURL(url)
	if err != nil {
		return nil, err
	}
	switch u.scheme {
	case schemeCluster, schemeClusterTLS:
		return goredis.NewClusterClient(&goredis.ClusterOptions{
			Addrs: u.hosts, Username: u.username, Password: u.password, ClientName: u.clientName,
			Protocol: u.protocol, MaxRetries: -1, DialTimeout: u.dialTimeout, ReadTimeout: u.readTimeout,
			WriteTimeout: u.readTimeout, PoolSize: u.poolSize, TLSConfig: u.tls,
		}), nil
	case schemeSentinel:
		return goredis.NewFailoverClient(&goredis.FailoverOptions{
			MasterName: u.master, SentinelAddrs: u.hosts, SentinelUsername: u.sentinelUsername,
			SentinelPassword: u.sentinelPassword, Username: u.username, Password: u.password, DB: u.db,
			ClientName: u.clientName, Protocol: u.protocol, MaxRetries: -1, DialTimeout: u.dialTimeout,
			ReadTimeout: u.readTimeout, WriteTimeout: u.readTimeout, PoolSize: u.poolSize,
		}), nil
	}
	options := &goredis.Options{
		Network: "tcp", Username: u.username, Password: u.password, DB: u.db, ClientName: u.clientName,
		Protocol: u.protocol, MaxRetries: -1, DialTimeout: u.dialTimeout, ReadTimeout: u.readTimeout,
		WriteTimeout: u.readTimeout, PoolSize: u.poolSize, TLSConfig: u.tls,
	}
	if u.scheme == schemeUnix {
		options.Network, options.Addr = "unix", u.socket
	} else {
		options.Addr = u.hosts[0]
	}
	return goredis.NewClient(options), nil
}

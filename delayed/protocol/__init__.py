"""The one package that talks to Redis: the connection, the Lua scripts (lua/, one typed call each),
the producer's Queue, and the operations of workers, sweepers, the scheduler and operators."""

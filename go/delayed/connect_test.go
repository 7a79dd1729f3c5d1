package delayed

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// enqueueThrough connects to url and enqueues one task to queue name through the client.
func enqueueThrough(t *testing.T, url, name string) error {
	t.Helper()
	client, err := Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	return NewQueueWithClient(name, client).Enqueue(NewGoTask("main.Add", 1, 2))
}

// length is the length of list key in database db of the server at addr.
func length(t *testing.T, addr string, db int, key string) int64 {
	t.Helper()
	client := goredis.NewClient(&goredis.Options{Addr: addr, DB: db, Protocol: 2})
	defer client.Close()
	return client.LLen(context.Background(), key).Val()
}

func TestConnectToOneServerWithADatabaseAPasswordOrAUser(t *testing.T) {
	server := startRedis(t)
	ctx := context.Background()
	if err := server.Client.Do(ctx, "ACL", "SETUSER", "delayed", "on", ">pa:ss", "~*", "&*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	if err := server.Client.ConfigSet(ctx, "requirepass", "s3cr/et").Err(); err != nil {
		t.Fatal(err)
	}
	if err := enqueueThrough(t, "redis://:s3cr%2Fet@"+server.Addr+"/3", "q"); err != nil {
		t.Fatal(err)
	}
	if err := enqueueThrough(t, "redis://delayed:pa%3Ass@"+server.Addr+"?db=4", "q"); err != nil {
		t.Fatal(err)
	}
	if err := enqueueThrough(t, "redis://:wrong@"+server.Addr+"/3", "q"); err == nil {
		t.Fatal("a wrong password enqueued")
	}
	for db, want := range map[int]int64{0: 0, 3: 1, 4: 1} {
		client := goredis.NewClient(&goredis.Options{Addr: server.Addr, DB: db, Password: "s3cr/et", Protocol: 2})
		if got := client.LLen(ctx, "q").Val(); got != want {
			t.Errorf("db %d holds %d tasks, want %d", db, got, want)
		}
		client.Close()
	}
}

func TestConnectToAUnixSocket(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "redis.sock")
	server := startRedis(t, "--unixsocket", socket, "--unixsocketperm", "700")
	if err := enqueueThrough(t, "unix://"+socket+"?db=2", "q"); err != nil {
		t.Fatal(err)
	}
	if got := length(t, server.Addr, 2, "q"); got != 1 {
		t.Fatalf("db 2 holds %d tasks", got)
	}
}

func TestConnectOverTLSVerifiesTheServerAndGivesACertificate(t *testing.T) {
	certs := makeCertificates(t)
	port := freePort(t)
	server := startRedis(t, "--tls-port", fmt.Sprint(port), "--tls-cert-file", certs.ServerCert, "--tls-key-file",
		certs.ServerKey, "--tls-ca-cert-file", certs.CA, "--tls-auth-clients", "yes")
	url := fmt.Sprintf("rediss://127.0.0.1:%d/0", port)
	withFiles := fmt.Sprintf("%s?ssl_ca_certs=%s&ssl_certfile=%s&ssl_keyfile=%s", url, certs.CA, certs.ClientCert, certs.ClientKey)
	if err := enqueueThrough(t, withFiles, "q"); err != nil {
		t.Fatal(err)
	}
	if err := enqueueThrough(t, strings.Replace(withFiles, "127.0.0.1", "localhost", 1), "q"); err == nil {
		t.Fatal("a certificate for 127.0.0.1 passed for localhost")
	}
	if err := enqueueThrough(t, strings.Replace(withFiles, "127.0.0.1", "localhost", 1)+"&ssl_check_hostname=false", "q"); err != nil {
		t.Fatalf("ssl_check_hostname=false: %v", err)
	}
	if err := enqueueThrough(t, fmt.Sprintf("%s?ssl_certfile=%s&ssl_keyfile=%s", url, certs.ClientCert, certs.ClientKey), "q"); err == nil {
		t.Fatal("a server signed by an unknown CA was trusted")
	}
	if got := length(t, server.Addr, 0, "q"); got != 2 {
		t.Fatalf("the server holds %d tasks", got)
	}
}

func TestConnectThroughSentinelFollowsAFailover(t *testing.T) {
	primary := startRedis(t)
	host, port, _ := strings.Cut(primary.Addr, ":")
	replica := startRedis(t, "--replicaof", host, port)
	sentinel := startSentinel(t, primary.Addr)
	ctx := context.Background()
	waitFor(t, "the sentinel to know the replica", func() bool {
		replicas, _ := sentinel.Client.Replicas(ctx, masterName).Result()
		return len(replicas) == 1 && replicas[0]["flags"] == "slave" && replicas[0]["master-link-status"] == "ok"
	})
	client, err := Connect(fmt.Sprintf("redis+sentinel://%s/%s/1", sentinel.Addr, masterName))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	queue := NewQueueWithClient("q", client)
	if err := queue.Enqueue(NewGoTask("main.Add", 1, 2)); err != nil {
		t.Fatal(err)
	}
	if got := length(t, primary.Addr, 1, "q"); got != 1 {
		t.Fatalf("db 1 of the primary holds %d tasks", got)
	}
	waitFor(t, "a failover to the replica", func() bool {
		sentinel.Client.Failover(ctx, masterName)
		return sentinel.primary() == replica.Addr
	})
	waitFor(t, "an enqueue that reaches the new primary", func() bool {
		return queue.Enqueue(NewGoTask("main.Add", 3, 4)) == nil && length(t, replica.Addr, 1, "q") >= 2
	})
}

func TestConnectToAClusterEnqueuesToATaggedQueueAndRefusesAnUntaggedOne(t *testing.T) {
	cluster := startCluster(t)
	client, err := Connect(cluster.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx := context.Background()
	queue := NewQueueWithClient("{orders}", client)
	if err := queue.Enqueue(NewGoTask("main.Add", 1, 2)); err != nil {
		t.Fatal(err)
	}
	for _, options := range [][]TaskOption{{Delay(time.Hour)}, {ResultTTL(time.Hour)}, {UniqueFor(time.Hour), ResultTTL(time.Hour)}} {
		if _, err := queue.EnqueueContext(ctx, NewPyTask("tasks:add", []int{1, 2}, nil), options...); err != nil {
			t.Fatalf("%d options: %v", len(options), err)
		}
	}
	node := cluster.primaryFor(t, "{orders}")
	if got := node.Client.LLen(ctx, "{orders}").Val(); got != 3 {
		t.Fatalf("the queue's node holds %d tasks", got)
	}
	if got := node.Client.ZCard(ctx, "{orders}_scheduled").Val(); got != 1 {
		t.Fatalf("the queue's node holds %d scheduled tasks", got)
	}
	err = NewQueueWithClient("orders", client).Enqueue(NewGoTask("main.Add", 1, 2))
	if err == nil || err.Error() != "queue 'orders' has no hash tag, which a Redis Cluster needs to keep all its keys "+
		"in one slot: name it '{orders}' (braces and all, everywhere the queue is named)" {
		t.Fatalf("an untagged queue: %v", err)
	}
	if cluster.primaryFor(t, "orders").Client.Exists(ctx, "orders", "orders_noti", "orders_counts").Val() != 0 {
		t.Fatal("the untagged queue was written")
	}
}

func TestAURLConnectCannotUseIsOneErrorWithoutItsPassword(t *testing.T) {
	cases := map[string]string{
		"":                                                     "an empty URL: a Redis URL starts with one of redis://, rediss://, unix://, ",
		"localhost:6379":                                       "localhost:6379: a Redis URL starts with one of ",
		"redis://:s3cret@127.0.0.1:notaport/0":                 "redis://:***@127.0.0.1:notaport/0: name the server as host or host:port",
		"redis://:s3cret@127.0.0.1:6379/db1":                   "redis://:***@127.0.0.1:6379/db1: the path names a database by its number, as /0",
		"redis://:s3/cret@127.0.0.1:6379/0":                    "redis://:***@127.0.0.1:6379/0: its password holds a '/': percent-encode it as %2F",
		"redis+cluster://:s3cret@127.0.0.1":                    "redis+cluster://:***@127.0.0.1: name each node as host:port, separated by commas",
		"redis+cluster://127.0.0.1:1/2":                        "redis+cluster://127.0.0.1:1/2: a cluster has no databases but 0; leave the path out",
		"redis+sentinel://:s3cret@127.0.0.1:1":                 "redis+sentinel://:***@127.0.0.1:1: give the master's name after the sentinels",
		"redis://127.0.0.1/0?password=s3cret&socket_timeout=0": "redis://127.0.0.1/0?password=***&socket_timeout=0: socket_timeout must be",
		"redis://127.0.0.1/0?bogus=1":                          "redis://127.0.0.1/0?bogus=1: query option bogus is not one Connect takes",
		"redis://127.0.0.1/0?ssl_ca_certs=ca.crt":              "redis://127.0.0.1/0?ssl_ca_certs=ca.crt: ssl_ca_certs needs a rediss:// or rediss+cluster:// URL",
		"rediss://127.0.0.1/0?ssl_ca_certs=/nonexistent":       "rediss://127.0.0.1/0?ssl_ca_certs=/nonexistent: ssl_ca_certs: open /nonexistent",
		"redis://127.0.0.1/0?sentinel_password=s3cret":         "redis://127.0.0.1/0?sentinel_password=***: query option sentinel_password is not one",
		"unix://host/redis.sock":                               "unix://host/redis.sock: a unix:// URL names a socket, not a host",
	}
	for url, says := range cases {
		client, err := Connect(url)
		var urlError *RedisURLError
		if client != nil || !errors.As(err, &urlError) || !strings.HasPrefix(err.Error(), says) || strings.Contains(err.Error(), "s3") {
			t.Errorf("%q: %v", url, err)
		}
	}
}

func TestParseRedisURLReadsWhatPythonsConnectReads(t *testing.T) {
	u, err := parseRedisURL("redis+sentinel://us%40er:p%40ss@10.0.0.1:26379,[::1]:26380/mymaster/2?sentinel_password=sp&socket_timeout=2.5&socket_keepalive=true")
	if err != nil {
		t.Fatal(err)
	}
	if u.master != "mymaster" || u.db != 2 || len(u.hosts) != 2 || u.hosts[1] != "[::1]:26380" || u.username != "us@er" ||
		u.password != "p@ss" || u.sentinelPassword != "sp" || u.readTimeout != 2500*time.Millisecond || u.tls != nil {
		t.Errorf("sentinel: %+v", u)
	}
	u, err = parseRedisURL("rediss://redis.internal")
	if err != nil || u.hosts[0] != "redis.internal:6379" || u.db != 0 || u.tls == nil || u.tls.ServerName != "" ||
		u.readTimeout != socketTimeout || u.dialTimeout != connectTimeout || u.protocol != 2 {
		t.Errorf("rediss: %+v, %v", u, err)
	}
	u, err = parseRedisURL("rediss+cluster://a:1,b:2/?ssl_cert_reqs=none&db=5")
	if err != nil || len(u.hosts) != 2 || u.db != 0 || !u.tls.InsecureSkipVerify {
		t.Errorf("cluster: %+v, %v", u, err)
	}
	u, err = parseRedisURL("redis://")
	if err != nil || u.hosts[0] != "localhost:6379" {
		t.Errorf("defaults: %+v, %v", u, err)
	}
}

func TestConfiguredURLIsTheVariablesElseLocalhost(t *testing.T) {
	t.Setenv(urlVariable, "")
	if got := ConfiguredURL(); got != "redis://localhost:6379/0" {
		t.Errorf("without the variable: %s", got)
	}
	t.Setenv(urlVariable, "redis://example:1/2")
	if got := ConfiguredURL(); got != "redis://example:1/2" {
		t.Errorf("with the variable: %s", got)
	}
}

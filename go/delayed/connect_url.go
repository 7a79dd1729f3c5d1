package delayed

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The URL schemes Connect takes, as Python's delayed.connect takes them (delayed/protocol/connection.py).
const (
	schemeRedis      = "redis://"
	schemeTLS        = "rediss://"
	schemeUnix       = "unix://"
	schemeCluster    = "redis+cluster://"
	schemeClusterTLS = "rediss+cluster://"
	schemeSentinel   = "redis+sentinel://"
)

var urlSchemes = []string{schemeRedis, schemeTLS, schemeUnix, schemeCluster, schemeClusterTLS, schemeSentinel}

// Client settings every client Connect makes starts from, as Python's connect() sets them.
const (
	// urlVariable names the environment variable that holds the Redis URL of every process of ours.
	urlVariable = "DELAYED_REDIS_URL"
	// defaultRedisURL is the Redis used when urlVariable names none.
	defaultRedisURL = "redis://localhost:6379/0"
	// socketTimeout is how long a reply may take; above any BLPOP timeout we use, so a dead peer is noticed.
	socketTimeout = 10 * time.Second
	// connectTimeout is how long a connection may take to open.
	connectTimeout = 5 * time.Second
)

// RedisURLError is a Redis URL Connect cannot use, and why.
type RedisURLError struct {
	URL    string // the URL, its passwords masked
	Reason string // what is wrong with it, in a line
}

// Error says the URL, its passwords masked, and what is wrong with it.
func (e *RedisURLError) Error() string {
	if e.URL == "" {
		return "an empty URL: " + e.Reason
	}
	return e.URL + ": " + e.Reason
}

// ConfiguredURL is the Redis URL in $DELAYED_REDIS_URL, else redis://localhost:6379/0: the Redis every
// process of ours (Python's and Go's) uses unless told otherwise.
func ConfiguredURL() string {
	if configured := os.Getenv(urlVariable); configured != "" {
		return configured
	}
	return defaultRedisURL
}

// redisURL is what a Redis URL says: where, who, and how.
type redisURL struct {
	scheme   string
	hosts    []string // host:port each; one for redis:// and rediss://
	socket   string   // unix://'s path
	master   string   // redis+sentinel://'s master name
	db       int
	username string
	password string
	// sentinelUsername and sentinelPassword are the sentinels' own, from the query.
	sentinelUsername string
	sentinelPassword string
	tls              *tls.Config
	readTimeout      time.Duration
	dialTimeout      time.Duration
	poolSize         int
	clientName       string
	protocol         int
}

var (
	hostPort = regexp.MustCompile(`^(?:\[[0-9a-fA-F:.]+\]|[^:\[\]/]+):\d{1,5}$`)
	hostOnly = regexp.MustCompile(`^(?:\[[0-9a-fA-F:.]+\]|[^:\[\]/]+)$`)
)

// singleHost is the host:port of a redis:// or rediss:// URL: localhost and 6379 when not given.
func singleHost(host string) (string, error) {
	switch {
	case host == "":
		return "localhost:6379", nil
	case hostOnly.MatchString(host):
		return host + ":6379", nil
	case hostPort.MatchString(host):
		return host, nil
	}
	return "", fmt.Errorf("name the server as host or host:port, its port a number")
}

// dbNumber is the database a URL names ("": 0), and whether it is one.
func dbNumber(text string) (int, bool) {
	if text == "" {
		return 0, true
	}
	number, err := strconv.Atoi(text)
	return number, err == nil && number >= 0 && strings.Trim(text, "0123456789") == ""
}

// parseRedisURL reads a URL as Python's connect() does; a *RedisURLError says what is wrong with it.
func parseRedisURL(raw string) (*redisURL, error) {
	fail := func(format string, args ...any) error {
		return &RedisURLError{URL: redactedURL(raw), Reason: fmt.Sprintf(format, args...)}
	}
	u := &redisURL{readTimeout: socketTimeout, dialTimeout: connectTimeout, protocol: 2}
	for _, scheme := range urlSchemes {
		if strings.HasPrefix(raw, scheme) {
			u.scheme = scheme
		}
	}
	if u.scheme == "" {
		return nil, fail("a Redis URL starts with one of %s", strings.Join(urlSchemes, ", "))
	}
	rest, query, _ := strings.Cut(strings.TrimPrefix(raw, u.scheme), "?")
	rest, _, _ = strings.Cut(rest, "#")
	netloc, path := rest, ""
	if at := strings.IndexByte(rest, '/'); at >= 0 {
		netloc, path = rest[:at], rest[at:]
	}
	userInfo, hosts := "", netloc
	if at := strings.LastIndexByte(netloc, '@'); at >= 0 {
		userInfo, hosts = netloc[:at], netloc[at+1:]
	} else if strings.Contains(path, "@") {
		return nil, fail("its password holds a '/': percent-encode it as %%2F")
	}
	if userInfo != "" {
		user, password, hasPassword := strings.Cut(userInfo, ":")
		var err error
		if u.username, err = url.PathUnescape(user); err != nil {
			return nil, fail("its user is not percent-encoded right")
		}
		if u.password, err = url.PathUnescape(password); hasPassword && err != nil {
			return nil, fail("its password is not percent-encoded right")
		}
	}
	switch u.scheme {
	case schemeUnix:
		if hosts != "" {
			return nil, fail("a unix:// URL names a socket, not a host: unix:///path/redis.sock")
		}
		if u.socket = path; u.socket == "" {
			return nil, fail("give the socket's path: unix:///path/redis.sock")
		}
	case schemeRedis, schemeTLS:
		host, err := singleHost(hosts)
		if err != nil {
			return nil, fail("%v", err)
		}
		u.hosts = []string{host}
		db, ok := dbNumber(strings.ReplaceAll(path, "/", ""))
		if !ok {
			return nil, fail("the path names a database by its number, as /0")
		}
		u.db = db
	default:
		for _, host := range strings.Split(hosts, ",") {
			if !hostPort.MatchString(host) {
				return nil, fail("name each node as host:port, separated by commas (got %q)", host)
			}
			u.hosts = append(u.hosts, host)
		}
		if u.scheme == schemeSentinel {
			master, db, _ := strings.Cut(strings.Trim(path, "/"), "/")
			number, ok := dbNumber(db)
			if master == "" || !ok {
				return nil, fail("give the master's name after the sentinels: redis+sentinel://host:port[,host:port...]/MASTER_NAME[/db]")
			}
			u.master, u.db = master, number
		} else if trimmed := strings.Trim(path, "/"); trimmed != "" && trimmed != "0" {
			return nil, fail("a cluster has no databases but 0; leave the path out")
		}
	}
	if u.scheme == schemeTLS || u.scheme == schemeClusterTLS {
		// no ServerName: each connection verifies the name it dialled, every node of a cluster its own
		u.tls = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if err := u.setQuery(query); err != nil {
		return nil, fail("%v", err)
	}
	return u, nil
}

// ignoredOptions are redis-py's query options that tune its own client: Connect takes them, so a URL
// Python takes works here too, and leaves go-redis's behaviour as it is.
var ignoredOptions = map[string]bool{
	"socket_keepalive": true, "socket_read_size": true, "retry_on_timeout": true, "retry_on_error": true,
	"health_check_interval": true, "timeout": true, "legacy_responses": true,
}

// setQuery applies the query options, each as redis-py reads it.
func (u *redisURL) setQuery(query string) error {
	values, err := url.ParseQuery(query)
	if err != nil {
		return fmt.Errorf("its query does not parse")
	}
	checkHostname, certFile, keyFile := true, "", ""
	names := make([]string, 0, len(values))
	for name := range values {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		value := values[name][len(values[name])-1]
		seconds := func(set *time.Duration) error {
			number, err := strconv.ParseFloat(value, 64)
			if err != nil || number <= 0 {
				return fmt.Errorf("%s must be a number of seconds above 0, got %q", name, value)
			}
			*set = time.Duration(number * float64(time.Second))
			return nil
		}
		count := func(set *int, low int) error {
			number, err := strconv.Atoi(value)
			if err != nil || number < low {
				return fmt.Errorf("%s must be a whole number from %d, got %q", name, low, value)
			}
			*set = number
			return nil
		}
		switch {
		case ignoredOptions[name]:
		case name == "db":
			if u.scheme != schemeCluster && u.scheme != schemeClusterTLS { // Python's connect drops it for a cluster
				err = count(&u.db, 0)
			}
		case name == "username":
			u.username = value
		case name == "password":
			u.password = value
		case name == "client_name":
			u.clientName = value
		case name == "socket_timeout":
			err = seconds(&u.readTimeout)
		case name == "socket_connect_timeout":
			err = seconds(&u.dialTimeout)
		case name == "max_connections":
			err = count(&u.poolSize, 1)
		case name == "protocol":
			if err = count(&u.protocol, 2); err == nil && u.protocol > 3 {
				err = fmt.Errorf("protocol must be 2 or 3, got %q", value)
			}
		case (name == "sentinel_username" || name == "sentinel_password") && u.scheme == schemeSentinel:
			if name == "sentinel_username" {
				u.sentinelUsername = value
			} else {
				u.sentinelPassword = value
			}
		case strings.HasPrefix(name, "ssl_") && u.tls != nil:
			switch name {
			case "ssl_cert_reqs":
				switch strings.ToLower(value) {
				case "none":
					u.tls.InsecureSkipVerify = true
				case "optional", "required":
				default:
					err = fmt.Errorf("ssl_cert_reqs must be none, optional or required, got %q", value)
				}
			case "ssl_check_hostname":
				checkHostname, err = strconv.ParseBool(value)
			case "ssl_ca_certs":
				err = u.trustCAs(value)
			case "ssl_certfile":
				certFile = value
			case "ssl_keyfile":
				keyFile = value
			default:
				err = fmt.Errorf("query option %s is not one Connect takes", name)
			}
		case strings.HasPrefix(name, "ssl_"):
			err = fmt.Errorf("%s needs a rediss:// or rediss+cluster:// URL", name)
		default:
			err = fmt.Errorf("query option %s is not one Connect takes", name)
		}
		if err != nil {
			return err
		}
	}
	if certFile != "" || keyFile != "" {
		if keyFile == "" {
			keyFile = certFile // redis-py: a certfile may hold the key too
		}
		certificate, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return fmt.Errorf("ssl_certfile and ssl_keyfile: %v", err)
		}
		u.tls.Certificates = []tls.Certificate{certificate}
	}
	if u.tls != nil && !checkHostname && !u.tls.InsecureSkipVerify {
		u.tls.InsecureSkipVerify = true // the chain is still verified, below: only the name is not
		u.tls.VerifyConnection = verifyChain(u.tls)
	}
	return nil
}

// trustCAs makes the CAs in a PEM file the only ones the server's certificate may chain to.
func (u *redisURL) trustCAs(path string) error {
	pem, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("ssl_ca_certs: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return fmt.Errorf("ssl_ca_certs: no PEM certificate in %s", path)
	}
	u.tls.RootCAs = pool
	return nil
}

// verifyChain checks the server's certificate chain against config's CAs without its host name
// (ssl_check_hostname=false), as Python's ssl does with check_hostname off.
func verifyChain(config *tls.Config) func(tls.ConnectionState) error {
	return func(state tls.ConnectionState) error {
		if len(state.PeerCertificates) == 0 {
			return fmt.Errorf("the server sent no certificate")
		}
		intermediates := x509.NewCertPool()
		for _, certificate := range state.PeerCertificates[1:] {
			intermediates.AddCert(certificate)
		}
		_, err := state.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: config.RootCAs, Intermediates: intermediates})
		return err
	}
}

var passwordParameter = regexp.MustCompile(`(?i)([?&](?:sentinel_)?password=)[^&#]*`)

// redactedURL is raw without its passwords, for errors and logs (Python's redaction.redacted): the
// user info's part after its first ":" (all of it when it has none), and password= query values.
func redactedURL(raw string) string {
	scheme, rest, found := strings.Cut(raw, "://")
	if !found {
		scheme, rest = "", raw
	} else {
		scheme += "://"
	}
	if at := strings.LastIndexByte(rest, '@'); at >= 0 {
		user, _, hasPassword := strings.Cut(rest[:at], ":")
		if hasPassword {
			rest = user + ":***" + rest[at:]
		} else {
			rest = "***" + rest[at:]
		}
	}
	return passwordParameter.ReplaceAllString(scheme+rest, "${1}***")
}

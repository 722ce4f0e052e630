// Package ha keeps one guard acting per account among several processes:
// each process campaigns, per account, in an etcd election; the winner
// (the leader) sends the mutating calls, the others (standbys) read and
// evaluate in dry run. The leader checks, before each call, that its lease
// is held and not near expiry by its own monotonic clock, and writes the
// shared state through etcd transactions fenced on its leader key, so a
// deposed leader can neither act past its lease nor overwrite the state.
package ha

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Config is the ha section of the configuration.
type Config struct {
	// Endpoints are the etcd members' client URLs.
	Endpoints []string
	// CAFile, CertFile and KeyFile are the TLS files (all optional; a CA
	// alone is server-verified TLS, a cert and key add client auth).
	CAFile, CertFile, KeyFile string
	// Username and PasswordFile are etcd's auth; the password is read from
	// the file at start and never logged.
	Username, PasswordFile string
	// LeaseTTL is the lease of this process's leaderships, whole seconds,
	// at least 2s: a leader that cannot renew stops acting after LeaseTTL
	// minus its third (Margin), a standby takes over after LeaseTTL.
	LeaseTTL time.Duration
	// Prefix is the key prefix; accounts live under PREFIX/accounts/NAME/.
	Prefix string
	// Host names this process among the members (default: the host name).
	Host string
	// Advertise is the address of this process's listener as the others
	// reach it (engine.listen by default), given in the election value so
	// a standby can say where the leader is.
	Advertise string
	// DialTimeout bounds the connection to etcd at start (default 5s).
	DialTimeout time.Duration
}

// DefaultConfig is the ha section's defaults.
func DefaultConfig() Config {
	return Config{LeaseTTL: 5 * time.Second, Prefix: "/riskguard/", DialTimeout: 5 * time.Second}
}

// Margin is the part of the lease a leader never uses: it stops acting
// when less than this is left by its own clock. A third of the TTL covers
// a local clock running up to a third slower than etcd's, and the time a
// call takes to leave once it passed the check.
func (c Config) Margin() time.Duration { return c.LeaseTTL / 3 }

// Validate checks the section, naming every problem.
func (c Config) Validate() error {
	var errs []error
	if len(c.Endpoints) == 0 {
		errs = append(errs, errors.New("ha.etcd.endpoints: at least one etcd endpoint is needed"))
	}
	for _, e := range c.Endpoints {
		if strings.TrimSpace(e) == "" {
			errs = append(errs, errors.New("ha.etcd.endpoints: an empty endpoint"))
		}
	}
	if c.LeaseTTL < 2*time.Second {
		errs = append(errs, fmt.Errorf("ha.lease_ttl: %s is too short: at least 2s (etcd's leases are whole seconds, and a third of it is the safety margin)", c.LeaseTTL))
	} else if c.LeaseTTL%time.Second != 0 {
		errs = append(errs, fmt.Errorf("ha.lease_ttl: %s: etcd's leases are whole seconds", c.LeaseTTL))
	}
	if !strings.HasPrefix(c.Prefix, "/") {
		errs = append(errs, fmt.Errorf("ha.prefix: %q must start with /", c.Prefix))
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		errs = append(errs, errors.New("ha.etcd: cert_file and key_file go together"))
	}
	if c.Username != "" && c.PasswordFile == "" {
		errs = append(errs, errors.New("ha.etcd: username needs password_file"))
	}
	if c.Host == "" {
		errs = append(errs, errors.New("ha.host: empty (and the host name could not be read)"))
	}
	return errors.Join(errs...)
}

// clientConfig is the etcd client's configuration: TLS and auth files
// read now.
func (c Config) clientConfig() (clientv3.Config, error) {
	cc := clientv3.Config{Endpoints: c.Endpoints, DialTimeout: c.DialTimeout, Logger: nopLogger()}
	if cc.DialTimeout <= 0 {
		cc.DialTimeout = 5 * time.Second
	}
	if c.CAFile != "" || c.CertFile != "" {
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if c.CAFile != "" {
			pem, err := os.ReadFile(c.CAFile)
			if err != nil {
				return cc, fmt.Errorf("ha.etcd.ca_file: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return cc, fmt.Errorf("ha.etcd.ca_file %s: no certificate in it", c.CAFile)
			}
			tc.RootCAs = pool
		}
		if c.CertFile != "" {
			cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
			if err != nil {
				return cc, fmt.Errorf("ha.etcd.cert_file/key_file: %w", err)
			}
			tc.Certificates = []tls.Certificate{cert}
		}
		cc.TLS = tc
	}
	if c.Username != "" {
		b, err := os.ReadFile(c.PasswordFile)
		if err != nil {
			return cc, fmt.Errorf("ha.etcd.password_file: %w", err)
		}
		cc.Username, cc.Password = c.Username, strings.TrimSpace(string(b))
	}
	return cc, nil
}

package config

import (
	"os"
	"strings"

	"github.com/riskguard/riskguard/ha"
	"github.com/riskguard/riskguard/internal/yamlnode"
	"gopkg.in/yaml.v3"
)

// HA is the ha section: the cluster's etcd and this process's name (the
// settings and checks of package ha), and the account name of a
// configuration without accounts.
type HA struct {
	ha.Config
	// Account names the single account's election ("default").
	Account string
}

// haKeys are the ha section's keys, and those of its etcd mapping.
var (
	haKeys   = []string{"etcd", "lease_ttl", "prefix", "host", "advertise", "account"}
	etcdKeys = []string{"endpoints", "ca_file", "cert_file", "key_file", "username", "password_file"}
)

// haSection reads the ha section (n is its value node), with the
// RISKGUARD_HA_HOST, _ENDPOINTS (comma-separated), _ADVERTISE,
// _LEASE_TTL and _CA_FILE, _CERT_FILE, _KEY_FILE overrides, so that every host runs one file. listen is
// engine.listen, the default advertised address.
func (l *loader) haSection(n *yaml.Node, listen string) *HA {
	c := &HA{Config: ha.DefaultConfig(), Account: "default"}
	c.Host, _ = os.Hostname()
	c.Advertise = listen
	if n.Kind != yaml.MappingNode {
		l.errorf(n, "ha: expected a mapping")
		return nil
	}
	str := func(k, v *yaml.Node, dst *string) {
		if v.Kind != yaml.ScalarNode {
			l.errorf(v, "ha.%s: expected a string", k.Value)
			return
		}
		*dst = v.Value
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		switch k.Value {
		case "etcd":
			if v.Kind != yaml.MappingNode {
				l.errorf(v, "ha.etcd: expected a mapping")
				continue
			}
			for j := 0; j+1 < len(v.Content); j += 2 {
				ek, ev := v.Content[j], v.Content[j+1]
				switch ek.Value {
				case "endpoints":
					if err := ev.Decode(&c.Endpoints); err != nil {
						l.errorf(ev, "ha.etcd.endpoints: expected a list of URLs")
					}
				case "ca_file":
					str(ek, ev, &c.CAFile)
				case "cert_file":
					str(ek, ev, &c.CertFile)
				case "key_file":
					str(ek, ev, &c.KeyFile)
				case "username":
					str(ek, ev, &c.Username)
				case "password_file":
					str(ek, ev, &c.PasswordFile)
				default:
					l.unknownKey(ek, "ha.etcd.", etcdKeys)
				}
			}
		case "lease_ttl":
			d, err := yamlnode.ParseDuration(v.Value)
			if err != nil {
				l.errorf(v, "ha.lease_ttl: %v", err)
				continue
			}
			c.LeaseTTL = d
		case "prefix":
			str(k, v, &c.Prefix)
		case "host":
			str(k, v, &c.Host)
		case "advertise":
			str(k, v, &c.Advertise)
		case "account":
			str(k, v, &c.Account)
		default:
			l.unknownKey(k, "ha.", haKeys)
		}
	}
	if v := l.getenv("RISKGUARD_HA_HOST"); v != "" {
		c.Host = v
	}
	if v := l.getenv("RISKGUARD_HA_ENDPOINTS"); v != "" {
		c.Endpoints = strings.Split(v, ",")
	}
	if v := l.getenv("RISKGUARD_HA_ADVERTISE"); v != "" {
		c.Advertise = v
	}
	for env, dst := range map[string]*string{"RISKGUARD_HA_CA_FILE": &c.CAFile, "RISKGUARD_HA_CERT_FILE": &c.CertFile, "RISKGUARD_HA_KEY_FILE": &c.KeyFile} {
		if v := l.getenv(env); v != "" {
			*dst = v
		}
	}
	if v := l.getenv("RISKGUARD_HA_LEASE_TTL"); v != "" {
		d, err := yamlnode.ParseDuration(v)
		if err != nil {
			l.errorf(nil, "ha.lease_ttl (from RISKGUARD_HA_LEASE_TTL): %v", err)
		} else {
			c.LeaseTTL = d
		}
	}
	if err := c.Validate(); err != nil {
		for _, e := range strings.Split(err.Error(), "\n") {
			l.errorf(n, "%s", e)
		}
		return nil
	}
	if c.Account == "" || strings.ContainsAny(c.Account, "/ ") {
		l.errorf(n, "ha.account: %q: a name without / or spaces", c.Account)
		return nil
	}
	return c
}

package main

import "github.com/riskguard/riskguard/config"

// pickAccount is the account of cfg a command that reads one account works
// on: name's (--account), or the only one. A missing name with several
// accounts, or a name the file does not list, is refused naming them.
func pickAccount(cfg *config.Config, name string) (*config.Config, error) {
	if err := checkAccountFlag(cfg, name); err != nil {
		return nil, err
	}
	for _, a := range cfg.Accounts {
		if a.Name == name || name == "" {
			return a, nil
		}
	}
	return cfg, nil
}

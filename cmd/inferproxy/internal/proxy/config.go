package proxy

import "wntrmute.dev/boxmaker/pkg/host/roleconf/inferproxy"

// Config is inferproxy.toml, loaded and checked by package
// roleconf/inferproxy, which `bxctl doctor` runs too.
type Config = inferproxy.Config

// Load reads and checks the config file.
func Load(path string) (Config, error) { return inferproxy.Load(path) }

module wntrmute.dev/boxmaker

go 1.26

require github.com/BurntSushi/toml v1.6.0

require github.com/coder/websocket v1.8.15

package brokerd

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"wntrmute.dev/boxmaker/pkg/model/consult"
	"wntrmute.dev/boxmaker/pkg/tool/hostrule"
	"wntrmute.dev/boxmaker/pkg/tool/toolargs"
)

// Consult is brokerd.toml's [consult] table: the one
// OpenAI-compatible endpoint consult calls go to and how long one may
// take. Which model, which key and which sessions may use it are the
// owner's grants (pkg/tool/grant, brokerd's consult.go); the endpoint's host must be
// one a consult grant names, or every consult is refused (consult-host).
type Consult struct {
	// Endpoint is the API's base URL, without "/chat/completions":
	// https, a host name, no port, query or fragment.
	Endpoint string `toml:"endpoint"`
	// TemperatureMilli is the temperature in thousandths; at most 600
	// (0.6). Absent: 600.
	TemperatureMilli *int `toml:"temperature_milli"`
	// IdleTimeoutS is the liveness limit: no byte from the endpoint for
	// this long stops the call. 1 to 600; absent or 0: 60.
	IdleTimeoutS int `toml:"idle_timeout_s"`
	// TotalTimeoutS bounds a whole consult, the owner's approval not
	// included. 10 to 3600; absent or 0: 900.
	TotalTimeoutS int `toml:"total_timeout_s"`

	endpoint *Endpoint
}

// Endpoint is a checked [consult] table: what brokerd's policy needs of
// the endpoint (its policy.Endpoint).
type Endpoint struct {
	Base             string // the URL without "/chat/completions"
	Host             hostrule.Name
	TemperatureMilli int   // at most consult.MaxTemperatureMilli
	IdleMS           int64 // the liveness limit
	TotalMS          int64 // the total bound
}

// Consult defaults.
const (
	DefaultConsultIdleS  = 60
	DefaultConsultTotalS = 900
)

func (c *Consult) check() error {
	if c == nil {
		return nil
	}
	if c.Endpoint == "" {
		return errors.New("endpoint is missing")
	}
	u, err := url.Parse(c.Endpoint)
	if err != nil || u.Scheme != "https" || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
		return fmt.Errorf("endpoint %q must be an https URL with no query or fragment (the base, without /chat/completions)", c.Endpoint)
	}
	base := strings.TrimSuffix(c.Endpoint, "/")
	if strings.HasSuffix(base, "/chat/completions") {
		return fmt.Errorf("endpoint %q: give the base URL; brokerd adds /chat/completions", c.Endpoint)
	}
	full, err := toolargs.ParseURL(base + "/chat/completions")
	if err != nil {
		return fmt.Errorf("endpoint: %v", err)
	}
	temp := consult.MaxTemperatureMilli
	if c.TemperatureMilli != nil {
		temp = *c.TemperatureMilli
	}
	if temp < 0 || temp > consult.MaxTemperatureMilli {
		return fmt.Errorf("temperature_milli %d must be between 0 and %d (0.6): hosted reasoning models make malformed output above it", temp, consult.MaxTemperatureMilli)
	}
	idle, total := c.IdleTimeoutS, c.TotalTimeoutS
	if idle == 0 {
		idle = DefaultConsultIdleS
	}
	if total == 0 {
		total = DefaultConsultTotalS
	}
	switch {
	case idle < 1 || idle > 600:
		return fmt.Errorf("idle_timeout_s %d must be between 1 and 600", idle)
	case total < 10 || total > 3600:
		return fmt.Errorf("total_timeout_s %d must be between 10 and 3600", total)
	case idle > total:
		return fmt.Errorf("idle_timeout_s %d must not exceed total_timeout_s %d", idle, total)
	}
	c.endpoint = &Endpoint{Base: base, Host: full.Host(), TemperatureMilli: temp,
		IdleMS: int64(idle) * 1000, TotalMS: int64(total) * 1000}
	return nil
}

// ConsultEndpoint is the checked [consult] table; ok is false without
// one (or for a hand-made table its check refuses: Load refuses such a
// table).
func (c Config) ConsultEndpoint() (e Endpoint, ok bool) {
	if c.Consult == nil {
		return Endpoint{}, false
	}
	if c.Consult.endpoint == nil && c.Consult.check() != nil {
		return Endpoint{}, false
	}
	return *c.Consult.endpoint, true
}

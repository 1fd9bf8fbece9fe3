package broker

import (
	"wntrmute.dev/boxmaker/cmd/brokerd/internal/policy"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/brokerd"
)

// consultEndpoint is [consult] as the policy takes it; nil without one.
func consultEndpoint(c brokerd.Config) *policy.Endpoint {
	e, ok := c.ConsultEndpoint()
	if !ok {
		return nil
	}
	return &policy.Endpoint{Base: e.Base, Host: e.Host, TemperatureMilli: e.TemperatureMilli, IdleMS: e.IdleMS, TotalMS: e.TotalMS}
}

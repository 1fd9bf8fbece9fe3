package doctor

import (
	"fmt"
	"strings"

	"wntrmute.dev/boxmaker/pkg/model/llama"
	"wntrmute.dev/boxmaker/pkg/model/selftest"
)

// serving compares llama-server's serving settings with loopd.toml's
// [serving] record, with the self-test's own reads of /health, /props and
// /slots (never a completion), straight at inferproxy's upstream, under
// the probe deadline.
func (a *auditor) serving(in *install) {
	if !in.has("loopd") || !in.has("inferproxy") {
		return
	}
	if in.infer.Upstream == "" || in.loop.Model.Name == "" {
		a.add("doctor-serving", Problem, "inferproxy.toml names no upstream or loopd.toml no [model] name, so there is no server to compare")
		return
	}
	base := "http://" + in.infer.Upstream
	c, err := llama.New(llama.Config{BaseURL: base, Model: in.loop.Model.Name, IDSlot: in.loop.Model.MainSlot, IdleTimeout: a.opt.Probe})
	if err != nil {
		a.add("doctor-serving", Problem, "llama-server at %s: %v", base, err)
		return
	}
	ctx, cancel := a.probe()
	defer cancel()
	s := in.loop.Serving
	r := selftest.Serving(ctx, c, in.loop.Model.MainSlot, selftest.Expect{NCtx: s.NCtx, Slots: s.Slots, TemplateSHA256: s.TemplateSHA256})
	var failed, seen []string
	for _, ck := range r.Checks {
		if ck.OK {
			seen = append(seen, ck.Name+": "+ck.Detail)
		} else {
			failed = append(failed, ck.Name+": "+ck.Detail)
		}
	}
	if len(failed) > 0 {
		a.add("doctor-serving", Problem, "llama-server at %s (within %v): %s", base, a.opt.Probe, strings.Join(failed, "; "))
		return
	}
	msg := fmt.Sprintf("llama-server at %s serves as recorded in loopd.toml [serving]: %s", base, strings.Join(seen, "; "))
	if s.NCtx == 0 && s.Slots == 0 && s.TemplateSHA256 == "" {
		msg = fmt.Sprintf("llama-server at %s answers (%s); loopd.toml records no [serving] settings to compare", base, strings.Join(seen, "; "))
	}
	a.add("doctor-serving", OK, "%s", msg)
}

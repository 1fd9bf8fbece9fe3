package tools

import (
	"context"
	"crypto/x509"
	"net/http"

	"wntrmute.dev/boxmaker/pkg/model/consult"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/text/truncate"
	"wntrmute.dev/boxmaker/pkg/tool/toolargs"
	"wntrmute.dev/boxmaker/pkg/tool/toolinput"
)

// maxConsultOutput keeps the printed result under the runner's default
// stdout cap (1 MiB), with room for JSON's escapes.
const maxConsultOutput = 900 << 10

// runConsult posts call.Body to call.URL through the egress proxy.
func runConsult(ctx context.Context, env Env, call toolargs.ConsultCall, key *toolinput.Secret) error {
	if key == nil {
		return failf("consult: no API key was granted to this call: its grant names no secret; see docs/runbook.md#consult-failed")
	}
	if err := checkEgress(env); err != nil {
		return err
	}
	roots := env.RootCAs
	if roots == nil {
		var err error
		if roots, err = x509.SystemCertPool(); err != nil {
			return failf("consult: the CA bundle could not be read: %v", err)
		}
	}
	roots = withTestRoots(roots)
	tr := egressTransport(env.EgressSocket, roots)
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr,
		// A POST is never sent twice: a redirect is the endpoint's
		// answer, reported as its status.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	a, xerr := consult.Exchange(ctx, client, call, key.Value.Reveal())
	r := consult.Result{Answer: a}
	if xerr != nil {
		r.Error = xerr.Error()
	}
	out, err := encodeResult(r)
	if err != nil {
		return failf("consult: the result could not be written: %v", err)
	}
	if _, err := env.Stdout.Write(append(out, '\n')); err != nil {
		return failf("consult: writing the result: %v", err)
	}
	if xerr != nil {
		return failf("%s", xerr.Error())
	}
	return nil
}

// encodeResult writes r, halving the reasoning (then the answer) until
// the line fits maxConsultOutput, and saying so.
func encodeResult(r consult.Result) ([]byte, error) {
	for {
		b, err := strict.Marshal(r)
		if err != nil || len(b) <= maxConsultOutput {
			return b, err
		}
		r.Answer.Truncated = true
		if len(r.Answer.Reasoning) > 0 {
			r.Answer.Reasoning, _ = truncate.Bytes(r.Answer.Reasoning, len(r.Answer.Reasoning)/2)
		} else {
			r.Answer.Content, _ = truncate.Bytes(r.Answer.Content, len(r.Answer.Content)/2)
		}
	}
}

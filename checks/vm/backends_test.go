package vm

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/checks/vm/canary/scan"
	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/host/units"
)

// nonce is a fresh random string for canaries and log lines.
func nonce(t testing.TB) string {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// TestGuestBackends takes the shared guest as booted (Fresh) and proves, against the real
// systemd there, the parts the deployment reads its secrets and writes
// its logs through: package secret's credential backend under
// LoadCredentialEncrypted= (and its refusals), journald taking a unit's
// output, and the canary scanner the deployed test uses to show a token
// is nowhere it must not be.
func TestGuestBackends(t *testing.T) {
	m := shared.Use(t, Fresh, nil)
	ctx := func(d time.Duration) context.Context {
		c, cancel := context.WithTimeout(context.Background(), d)
		t.Cleanup(cancel)
		return c
	}
	sh := func(t *testing.T, script string) string {
		t.Helper()
		r, err := m.Sh(ctx(3*time.Minute), script)
		if err != nil || r.Exit != 0 {
			t.Fatalf("%s: %v %s", script, err, r)
		}
		return r.Stdout
	}
	unit := func(t *testing.T, name, body string) {
		t.Helper()
		if err := m.Put(ctx(time.Minute), "/etc/systemd/system/"+name, 0o644, []byte(body)); err != nil {
			t.Fatal(err)
		}
		sh(t, "systemctl daemon-reload")
	}
	journal := func(t *testing.T, name string) string {
		t.Helper()
		return sh(t, "journalctl --sync; journalctl -u "+name+" -o cat --no-pager")
	}

	// putCredcheck builds checks/vm/credcheck (the credential backend's
	// probe) and copies it into the guest as /usr/local/bin/bx-credcheck.
	putCredcheck := func(t *testing.T) {
		t.Helper()
		bin := filepath.Join(t.TempDir(), "credcheck")
		if err := GoBuild(ctx(5*time.Minute), bin, "./checks/vm/credcheck"); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Put(ctx(2*time.Minute), "/usr/local/bin/bx-credcheck", 0o755, b); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("credential backend", func(t *testing.T) {
		putCredcheck(t)
		token := "bx-cred-canary-" + nonce(t)
		// The plaintext reaches the guest only on stdin.
		if r, err := m.Run(ctx(time.Minute), []byte(token), "sh", "-c",
			"mkdir -p /etc/credstore.encrypted && systemd-creds encrypt --with-key=host --name=bot - /etc/credstore.encrypted/bot.cred"); err != nil || r.Exit != 0 {
			t.Fatalf("systemd-creds encrypt: %v %s", err, r)
		}
		base := "[Service]\nType=oneshot\nDynamicUser=yes\n"
		load := "LoadCredentialEncrypted=bot:/etc/credstore.encrypted/bot.cred\n"
		sum := sha256.Sum256([]byte(token))
		unit(t, "bx-credcheck.service", base+load+"ExecStart=/usr/local/bin/bx-credcheck credential:bot\n")
		sh(t, "systemctl start bx-credcheck.service")
		if got := journal(t, "bx-credcheck.service"); !strings.Contains(got, fmt.Sprintf("credcheck: credential:bot sha256 %x", sum)) || strings.Contains(got, token) {
			t.Errorf("the unit resolved credential:bot to something else, or logged it: %q (want the hash %x)", got, sum)
		}

		// Each refusal: the unit fails, its journal holds the store's
		// error with its runbook anchor and never the plaintext.
		for _, c := range []struct{ name, body, want string }{
			{"bx-credcheck-other.service", base + load + "ExecStart=/usr/local/bin/bx-credcheck credential:other\n",
				"load secret credential:other: open "},
			{"bx-credcheck-none.service", base + "ExecStart=/usr/local/bin/bx-credcheck credential:bot\n",
				"load secret credential:bot: CREDENTIALS_DIRECTORY is not set"},
		} {
			unit(t, c.name, c.body)
			if r, err := m.Sh(ctx(time.Minute), "systemctl start "+c.name); err != nil || r.Exit == 0 {
				t.Errorf("%s started: %v %s", c.name, err, r)
			}
			got := journal(t, c.name)
			if !strings.Contains(got, c.want) || !strings.Contains(got, "see docs/runbook.md#secret-missing") || strings.Contains(got, token) {
				t.Errorf("%s's journal = %q, want %q and see docs/runbook.md#secret-missing", c.name, got, c.want)
			}
			t.Logf("%s refused: %s", c.name, strings.TrimSpace(got))
		}
		// A credential loaded under another name than it was encrypted
		// for: systemd refuses to decrypt it, so the binary never runs.
		unit(t, "bx-credcheck-renamed.service", base+"LoadCredentialEncrypted=token:/etc/credstore.encrypted/bot.cred\nExecStart=/usr/local/bin/bx-credcheck credential:token\n")
		if r, err := m.Sh(ctx(time.Minute), "systemctl start bx-credcheck-renamed.service"); err != nil || r.Exit == 0 {
			t.Errorf("a credential loaded under another name started: %v %s", err, r)
		}
		if got := journal(t, "bx-credcheck-renamed.service"); strings.Contains(got, "credcheck: credential:token sha256") {
			t.Errorf("a renamed credential was decrypted: %q", got)
		}
		// Once the units have run, the plaintext is nowhere in the guest:
		// not on disk, not in the journal, not in a process, and not left
		// in /run/credentials.
		if hits := FindCanary(t, m, []byte(token)); len(hits) > 0 {
			t.Errorf("the credential's plaintext is in the guest at %v", hits)
		}
	})

	t.Run("honcho key", func(t *testing.T) {
		// memoryd's unit as pkg/host/units makes it with Honcho's key given:
		// its LoadCredentialEncrypted= line, substituted with the path
		// bxctl install writes, under memoryd's own user; the binary
		// resolves the ref memoryd's [honcho] key holds through package
		// secret's credential backend, as memoryd's Honcho client does.
		const credDir = "/etc/boxmaker/credentials"
		mem := units.Of(layout.Memoryd, units.HonchoKey)
		load := mem.Values("Service", "LoadCredentialEncrypted")
		if len(load) != 1 {
			t.Fatalf("memoryd's unit with Honcho's key loads %q, want one credential", load)
		}
		line, err := units.Substitute(load[0], map[string]string{units.CredentialPath(units.HonchoKey): credDir + "/" + units.HonchoKey + ".cred"})
		if err != nil {
			t.Fatal(err)
		}
		if off := units.Of(layout.Memoryd); off.Values("Service", "LoadCredentialEncrypted") != nil {
			t.Errorf("memoryd's unit without Honcho's key loads %q", off.Values("Service", "LoadCredentialEncrypted"))
		}
		putCredcheck(t)
		user := units.UserName(layout.Memoryd)
		uid := layout.DefaultUsers(layout.ID{}).Of(layout.Memoryd).UID
		sh(t, fmt.Sprintf("getent passwd %[1]s >/dev/null || { groupadd --system --gid %[2]d %[1]s && useradd --system --uid %[2]d --gid %[2]d --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin %[1]s; }", user, uid))
		// A JWT-shaped canary, as Honcho's keys are; the plaintext reaches
		// the guest only on systemd-creds' stdin, as bxctl install hands it.
		key := "eyJhbGciOiJIUzI1NiJ9.bx-honcho-canary-" + nonce(t) + ".sig"
		if r, err := m.Run(ctx(time.Minute), []byte(key), "sh", "-c",
			"mkdir -p -m 0700 "+credDir+" && systemd-creds encrypt --name="+units.HonchoKey+" - "+credDir+"/"+units.HonchoKey+".cred && chmod 0600 "+credDir+"/"+units.HonchoKey+".cred"); err != nil || r.Exit != 0 {
			t.Fatalf("systemd-creds encrypt: %v %s", err, r)
		}
		const name = "bx-honcho-key.service"
		unit(t, name, "[Service]\nType=exec\nUser="+user+"\nGroup="+user+"\nLoadCredentialEncrypted="+line+
			"\nExecStart=/usr/local/bin/bx-credcheck -hold credential:"+units.HonchoKey+"\n")
		sh(t, "systemctl start "+name)
		t.Cleanup(func() { m.Sh(ctx(time.Minute), "systemctl stop "+name) })
		// systemd 252's `systemctl show` prints this property as
		// [unprintable]; the decrypted file is what the unit was given.
		own := "/run/credentials/" + name + "/"
		if got := strings.TrimSpace(sh(t, "stat -c '%a %U' "+own+units.HonchoKey)); got != "400 "+user {
			t.Errorf("%s%s is %q, want 400 %s (the unit's user alone)", own, units.HonchoKey, got, user)
		}
		sum := sha256.Sum256([]byte(key))
		want := fmt.Sprintf("credcheck: credential:%s sha256 %x", units.HonchoKey, sum)
		var got string
		for i := 0; i < 100 && !strings.Contains(got, want); i++ {
			time.Sleep(100 * time.Millisecond)
			got = journal(t, name)
		}
		if !strings.Contains(got, want) || strings.Contains(got, key) {
			t.Errorf("memoryd's credential backend resolved credential:%s to something else, or logged it: %q (want the hash %x)", units.HonchoKey, got, sum)
		}
		// While the unit runs, the key is in clear only in its own
		// credential directory (ramfs): not in the .cred file, the
		// journal, any process's environment or command line, any disk.
		seen := false
		for _, h := range FindCanary(t, m, []byte(key)) {
			if h.Kind == "file" && strings.HasPrefix(h.Path, own) {
				seen = true
				continue
			}
			t.Errorf("Honcho's key is in clear at %s", h)
		}
		if !seen {
			t.Errorf("the scan did not find Honcho's key in %s, where systemd keeps it for the running unit: it cannot show it is nowhere else", own)
		}

		// Why memoryd's unit declares the key only when the owner gives
		// one (docs/decisions.md): a LoadCredentialEncrypted= whose file
		// is absent fails the unit before its binary runs.
		unit(t, "bx-honcho-absent.service", "[Service]\nType=oneshot\nUser="+user+"\nLoadCredentialEncrypted="+units.HonchoKey+":"+credDir+"/absent.cred\nExecStart=/bin/true\n")
		if r, err := m.Sh(ctx(time.Minute), "systemctl start bx-honcho-absent.service"); err != nil || r.Exit == 0 {
			t.Errorf("a unit loading an absent credential started: %v %s", err, r)
		}
		t.Logf("a unit loading an absent credential: %s", strings.TrimSpace(sh(t, "systemctl show -p Result -p ExecMainStatus --value bx-honcho-absent.service | tr '\\n' ' '")))
	})

	t.Run("journald", func(t *testing.T) {
		n := nonce(t)
		unit(t, "bx-journal.service", "[Service]\nType=oneshot\nExecStart=/bin/sh -c 'echo bx-out-"+n+"; echo bx-err-"+n+" >&2'\n")
		sh(t, "systemctl start bx-journal.service")
		out := sh(t, "journalctl --sync; journalctl -u bx-journal.service -o json --no-pager")
		found := map[string]bool{}
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			var e struct {
				Message   string `json:"MESSAGE"`
				Unit      string `json:"_SYSTEMD_UNIT"`
				Transport string `json:"_TRANSPORT"`
			}
			if json.Unmarshal([]byte(l), &e) != nil {
				continue
			}
			if e.Unit == "bx-journal.service" && e.Transport == "stdout" {
				found[e.Message] = true
			}
		}
		for _, want := range []string{"bx-out-" + n, "bx-err-" + n} {
			if !found[want] {
				t.Errorf("journalctl -u bx-journal.service has no stdout-transport entry %q: %v", want, found)
			}
		}
		t.Logf("journal storage: %s", strings.TrimSpace(sh(t, "ls -d /var/log/journal/*/ /run/log/journal/*/ 2>/dev/null; true")))
	})

	t.Run("canary", func(t *testing.T) {
		n := nonce(t)
		kinds := []string{"file", "journal", "podman storage", "environ", "cmdline", "never planted"}
		canaries := make([][]byte, len(kinds))
		for i, k := range kinds {
			canaries[i] = []byte("bx-canary-" + strings.ReplaceAll(k, " ", "-") + "-" + n)
		}
		plant := func(stdin []byte, script string) {
			t.Helper()
			if r, err := m.Run(ctx(3*time.Minute), stdin, "sh", "-c", script); err != nil || r.Exit != 0 {
				t.Fatalf("%s: %v %s", script, err, r)
			}
		}
		if err := m.Put(ctx(time.Minute), "/var/lib/bx-canary/planted", 0o600, append([]byte("before "), canaries[0]...)); err != nil {
			t.Fatal(err)
		}
		plant(canaries[1], "systemd-cat -t bx-canary && journalctl --sync")
		var layer bytes.Buffer
		tw := tar.NewWriter(&layer)
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "canary", Mode: 0o644, Size: int64(len(canaries[2]))})
		tw.Write(canaries[2])
		tw.Close()
		plant(layer.Bytes(), "for i in $(seq 120); do [ -S /run/user/1000/podman/podman.sock ] && break; sleep 1; done; "+
			"runuser -u rootless -- podman --remote --url "+podmanSock+" import - localhost/bx-canary:vm >/dev/null")
		plant(canaries[3], `read -r t; BX_CANARY="$t" setsid sleep 900 </dev/null >/dev/null 2>&1 &`)
		plant(canaries[4], `read -r t; setsid sh -c 'sleep 900; :' "$t" </dev/null >/dev/null 2>&1 &`)

		began := time.Now()
		rep, err := Scan(ctx(15*time.Minute), m, canaries)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("scanned %d files (%d MB) and %d processes in %v; skipped %v", rep.Files, rep.Bytes>>20, rep.Procs, time.Since(began).Round(time.Millisecond), rep.Skipped)
		if len(rep.Errors) > 0 {
			t.Errorf("the scan could not read: %v", rep.Errors)
		}
		at := make([][]scan.Hit, len(kinds))
		for _, h := range rep.Hits {
			at[h.Canary] = append(at[h.Canary], h)
		}
		for i, k := range kinds {
			t.Logf("%s: %v", k, at[i])
		}
		expect := []func(scan.Hit) bool{
			func(h scan.Hit) bool { return h.Kind == "file" && h.Path == "/var/lib/bx-canary/planted" },
			func(h scan.Hit) bool {
				return h.Kind == "file" && strings.HasSuffix(h.Path, ".journal") &&
					(strings.HasPrefix(h.Path, "/var/log/journal/") || strings.HasPrefix(h.Path, "/run/log/journal/"))
			},
			func(h scan.Hit) bool {
				return h.Kind == "file" && strings.HasPrefix(h.Path, "/home/rootless/.local/share/containers/storage/")
			},
			func(h scan.Hit) bool { return h.Kind == "environ" && h.Comm == "sleep" },
			func(h scan.Hit) bool { return h.Kind == "cmdline" && h.Comm == "sh" },
		}
		for i, ok := range expect {
			seen := false
			for _, h := range at[i] {
				seen = seen || ok(h)
			}
			if !seen {
				t.Errorf("the %s canary was not found where it was planted; hits: %v", kinds[i], at[i])
			}
		}
		if hits := at[len(kinds)-1]; len(hits) > 0 {
			t.Errorf("a canary never planted was found at %v", hits)
		}
		// The public helper answers the same for one token.
		if hits := FindCanary(t, m, canaries[0]); len(hits) != 1 || hits[0].Path != "/var/lib/bx-canary/planted" {
			t.Errorf("FindCanary of the file canary = %v, want only /var/lib/bx-canary/planted", hits)
		}
	})
}

// Command credcheck is the VM tests' client of the real credential
// backend: run by a systemd unit in the guest, it resolves the secret ref
// given as its argument through package secret's Store (NewStore reads
// the $CREDENTIALS_DIRECTORY systemd sets for LoadCredentialEncrypted=),
// exactly as a role does, and prints the value's sha256 on success or the
// store's refusal on failure (exit 1). With -hold it then waits for
// SIGTERM, so its unit (and the decrypted credential systemd keeps in
// /run/credentials/<unit>/ while the unit runs) stays up for a scan.
//
// Invariant: it never prints, logs or passes on the value itself, only
// its hash, so the journal and the test's logs never hold a credential.
package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"wntrmute.dev/boxmaker/pkg/host/secret"
)

func main() {
	args := os.Args[1:]
	hold := len(args) == 2 && args[0] == "-hold"
	if hold {
		args = args[1:]
	}
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: credcheck [-hold] REF")
		os.Exit(2)
	}
	ref, err := secret.ParseRef(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, "credcheck:", err)
		os.Exit(2)
	}
	v, err := secret.NewStore(slog.New(slog.NewTextHandler(os.Stderr, nil))).Load(ref)
	if err != nil {
		fmt.Fprintln(os.Stderr, "credcheck:", err)
		os.Exit(1)
	}
	fmt.Printf("credcheck: %s sha256 %x\n", ref, sha256.Sum256([]byte(v.Reveal())))
	if hold {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
		defer stop()
		<-ctx.Done()
	}
}

// Command credcheck is the VM tests' client of the real credential
// backend: run by a systemd unit in the guest, it resolves the secret ref
// given as its argument through package secret's Store (NewStore reads
// the $CREDENTIALS_DIRECTORY systemd sets for LoadCredentialEncrypted=),
// exactly as a role does, and prints the value's sha256 on success or the
// store's refusal on failure (exit 1).
//
// Invariant: it never prints, logs or passes on the value itself, only
// its hash, so the journal and the test's logs never hold a credential.
package main

import (
	"crypto/sha256"
	"fmt"
	"log/slog"
	"os"

	"wntrmute.dev/boxmaker/pkg/secret"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: credcheck REF")
		os.Exit(2)
	}
	ref, err := secret.ParseRef(os.Args[1])
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
}

package ledger

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"wntrmute.dev/boxmaker/pkg/logs/audit"
)

// AdoptHead is brokerd --adopt-audit-head: with the ledger's lock held
// (so brokerd is not running), it records the audit log's end as its head
// ([audit.AdoptHead], which keeps the old record aside) and removes the
// clean mark, so the next start rebuilds every session's state from the
// log as it now is. Sessions the log no longer names keep their files:
// a taint is never lowered by losing records.
func AdoptHead(auditDir, stateDir string, now time.Time) (old *audit.Head, head audit.Head, err error) {
	err = WhileStopped("adopt audit head", stateDir, func() error {
		if err := os.Remove(filepath.Join(stateDir, cleanFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("adopt audit head: %v", err)
		}
		old, head, err = audit.AdoptHead(auditDir, now)
		return err
	})
	return old, head, err
}

// WhileStopped runs fn holding the state directory's lock, which a
// running brokerd's ledger holds for its lifetime: it refuses to run fn
// while brokerd runs. The owner's repairs (adopting a log's head) use it;
// op names the repair in the error.
func WhileStopped(op, stateDir string, fn func() error) error {
	if err := prepareDir(stateDir); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	fl, err := lockDir(stateDir)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	defer fl.Close()
	return fn()
}

package ledger

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"wntrmute.dev/boxmaker/pkg/audit"
)

// AdoptHead is brokerd --adopt-audit-head: with the ledger's lock held
// (so brokerd is not running), it records the audit log's end as its head
// ([audit.AdoptHead], which keeps the old record aside) and removes the
// clean mark, so the next start rebuilds every session's state from the
// log as it now is. Sessions the log no longer names keep their files:
// a taint is never lowered by losing records.
func AdoptHead(auditDir, stateDir string, now time.Time) (old *audit.Head, head audit.Head, err error) {
	if err := prepareDir(stateDir); err != nil {
		return nil, audit.Head{}, fmt.Errorf("adopt audit head: %w", err)
	}
	fl, err := lockDir(stateDir)
	if err != nil {
		return nil, audit.Head{}, fmt.Errorf("adopt audit head: %w", err)
	}
	defer fl.Close()
	if err := os.Remove(filepath.Join(stateDir, cleanFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, audit.Head{}, fmt.Errorf("adopt audit head: %v", err)
	}
	return audit.AdoptHead(auditDir, now)
}

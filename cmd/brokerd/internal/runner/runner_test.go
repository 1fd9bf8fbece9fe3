package runner

import (
	"context"
	"errors"
	"testing"

	"wntrmute.dev/boxmaker/cmd/brokerd/internal/policy"
)

func TestRefusingRunsNothing(t *testing.T) {
	if _, err := (Refusing{}).Run(context.Background(), policy.Decision{}); !errors.Is(err, ErrNoDecision) {
		t.Errorf("Run(zero Decision) = %v, want ErrNoDecision", err)
	}
}

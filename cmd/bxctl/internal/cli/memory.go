package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"wntrmute.dev/boxmaker/cmd/bxctl/internal/up"
	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/logs/jsonl"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
	"wntrmute.dev/boxmaker/pkg/text/escape"
	"wntrmute.dev/boxmaker/pkg/text/sanitize"
)

// runMemory is `bxctl memory [status]|resync|log|undo|check|review|why|forget`.
func runMemory(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		args = append([]string{"status"}, args...)
	}
	sub, args := args[0], args[1:]
	fs := flags("memory "+sub, stderr)
	stateFlag := fs.String("state", "", "state `directory` (default $BOXMAKER_STATE, else ./.boxmaker, or "+up.DevRoot+"/state as root)")
	undo := fs.Bool("undo", false, "forget: take the tombstone back")
	if err := fs.Parse(args); err != nil {
		return ExitUsage
	}
	state, err := resolveState(*stateFlag)
	if err != nil {
		fmt.Fprintf(stderr, "bxctl memory: %v\n", err)
		return ExitUsage
	}
	rest := fs.Args()
	fail := func(err error) int {
		fmt.Fprintf(stderr, "bxctl memory %s: %v\n", sub, err)
		return ExitFailed
	}
	switch {
	case (sub == "status" || sub == "resync") && len(rest) == 0:
		return memoryFleet(ctx, state, sub, stdout, stderr)
	case sub == "check" && len(rest) <= 1:
		file := ""
		if len(rest) == 1 {
			file = rest[0]
			if _, ok := wire.IdentityLimit[file]; !ok {
				fmt.Fprintln(stderr, "bxctl memory check: FILE must be soul.md, memory.md or user.md")
				return ExitUsage
			}
		}
		return memoryCheck(os.Stdin, file, stdout, stderr)
	case sub == "why" && len(rest) >= 1:
		// An id recall shows as several words may come quoted or not.
		return memoryWhy(ctx, state, strings.Join(rest, " "), stdout, stderr)
	case sub == "forget" && len(rest) >= 1:
		d, err := ask[*wire.MemoryDone](ctx, state, &wire.Memadmin, &wire.MemoryForget{ID: strings.Join(rest, " "), Undo: *undo})
		if err != nil {
			return fail(err)
		}
		fmt.Fprintln(stdout, escape.Line(d.Msg))
		return ExitOK
	case sub == "log" && len(rest) == 0:
		return memoryLog(state, stdout, stderr)
	case sub == "undo" && len(rest) == 1:
		d, err := ask[*wire.MemoryDone](ctx, state, &wire.Memadmin, &wire.MemoryUndo{File: rest[0]})
		if err != nil {
			return fail(err)
		}
		fmt.Fprintln(stdout, escape.Line(d.Msg))
		return ExitOK
	case sub == "review" && len(rest) == 0:
		items, err := ask[*wire.ReviewItems](ctx, state, &wire.Memadmin, &wire.ReviewList{})
		if err != nil {
			return fail(err)
		}
		printReview(items.Items, stdout)
		// Each item's why-chain, so the owner decides on where it came
		// from, not only on its text.
		for _, it := range items.Items {
			c, err := ask[*wire.WhyChain](ctx, state, &wire.Memadmin, &wire.MemoryWhy{ID: it.ID})
			if err != nil {
				fmt.Fprintf(stdout, "why %s: %v\n", escape.Line(it.ID), err)
				continue
			}
			printWhy(c, auditLinks(layout.Audit.In(state), c), stdout)
		}
		return ExitOK
	case sub == "review" && len(rest) >= 2 && len(rest) <= 3 && (rest[0] == "promote" || rest[0] == "drop"):
		file := ""
		if len(rest) == 3 {
			file = rest[2]
		}
		d, err := ask[*wire.MemoryDone](ctx, state, &wire.Memadmin, &wire.ReviewDecide{ID: rest[1], Action: rest[0], File: file})
		if err != nil {
			return fail(err)
		}
		fmt.Fprintln(stdout, escape.Line(d.Msg))
		return ExitOK
	}
	fmt.Fprintln(stderr, memoryUsage)
	return ExitUsage
}

const memoryUsage = "usage: bxctl memory [status]|resync|log|undo FILE|check [FILE]|review [promote ID [FILE] | drop ID]|why ID|forget [--undo] ID [--state DIR]"

// printReview lists review items, each with its data class: a note above
// private cannot be promoted, and the owner sees that before trying.
func printReview(items []wire.ReviewItem, stdout io.Writer) {
	if len(items) == 0 {
		fmt.Fprintln(stdout, "nothing to review")
	}
	for _, it := range items {
		note := ""
		if !it.Class.AtMost(dataclass.Private) {
			note = " (above private: cannot be promoted)"
		}
		fmt.Fprintf(stdout, "%s: %s, session %s, %s, class %s%s, for %s\n  %s\n", escape.Line(it.ID), escape.Line(it.Kind), escape.Line(it.Session),
			escape.Line(it.At), it.Class, note, escape.Line(it.File), escape.Line(it.Text))
	}
}

// memoryCheck is `bxctl memory check [FILE]`: the write check on stdin
// and, given the identity file it is for, that file's limit.
func memoryCheck(in io.Reader, file string, stdout, stderr io.Writer) int {
	b, err := io.ReadAll(io.LimitReader(in, 1<<20))
	if err != nil {
		fmt.Fprintf(stderr, "bxctl memory check: %v\n", err)
		return ExitFailed
	}
	if err := sanitize.Check(string(b)); err != nil {
		fmt.Fprintf(stdout, "refused: %s; see docs/runbook.md#memory-file-refused\n", escape.Line(err.Error()))
		return ExitFailed
	}
	if limit, ok := wire.IdentityLimit[file]; ok {
		if n := utf8.RuneCount(b); n > limit {
			fmt.Fprintf(stdout, "refused: %d characters, over the limit of %s, %d; see docs/runbook.md#memory-file-refused\n", n, file, limit)
			return ExitFailed
		}
		fmt.Fprintf(stdout, "clean (%d/%d characters)\n", utf8.RuneCount(b), limit)
		return ExitOK
	}
	fmt.Fprintln(stdout, "clean")
	return ExitOK
}

// memoryLog is `bxctl memory log`: the journal, read from the file.
func memoryLog(state string, stdout, stderr io.Writer) int {
	path := layout.Journal.In(state)
	n := 0
	err := jsonl.Scan(path, jsonl.DefaultMaxLine, func(line int, b []byte) error {
		var e wire.MemoryEdit
		if err := strict.Unmarshal(b, &e); err != nil {
			return fmt.Errorf("%s:%d: %v", path, line, err)
		}
		n++
		what := e.Action
		switch {
		case e.Action == "void": // memoryd's correction after a crash
			what = fmt.Sprintf("void of edit %d (journalled, never applied)", e.Undoes)
		case e.Undoes != 0:
			what = fmt.Sprintf("undo of edit %d", e.Undoes)
		case e.Note != "":
			what += " " + e.Note
		}
		fmt.Fprintf(stdout, "%d %s %s %s %s\n", e.Seq, escape.Line(e.At), escape.Line(e.Session), escape.Line(e.File), escape.Line(what))
		return nil
	})
	if errors.Is(err, os.ErrNotExist) {
		err = nil
	}
	if err != nil {
		fmt.Fprintf(stderr, "bxctl memory log: %v\n", err)
		return ExitFailed
	}
	if n == 0 {
		fmt.Fprintln(stdout, "no memory writes yet")
	}
	return ExitOK
}

// runReindex is `bxctl reindex`: memoryd rebuilds its index from the
// session logs and notes.md.
func runReindex(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flags("reindex", stderr)
	stateFlag := fs.String("state", "", "state `directory` (default $BOXMAKER_STATE, else ./.boxmaker, or "+up.DevRoot+"/state as root)")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		return ExitUsage
	}
	state, err := resolveState(*stateFlag)
	if err != nil {
		fmt.Fprintf(stderr, "bxctl reindex: %v\n", err)
		return ExitUsage
	}
	d, err := ask[*wire.MemoryDone](ctx, state, &wire.Memadmin, &wire.Reindex{})
	if err != nil {
		fmt.Fprintf(stderr, "bxctl reindex: %v\n", err)
		return ExitFailed
	}
	fmt.Fprintln(stdout, escape.Line(d.Msg))
	return ExitOK
}

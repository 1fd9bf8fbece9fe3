package vm

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
)

// Save takes a snapshot of the whole running guest under name (qemu's
// savevm: memory, devices and disk, into the disk's temporary qcow2
// overlay, so it goes when qemu exits), and [Machine.Restore] brings it
// back. The guest's agent sits waiting for a request throughout: no
// request is in flight while the machine is saved, so after a restore it
// waits for the next one, and the host's connection carries on.
func (m *Machine) Save(ctx context.Context, name string) error {
	return m.hmp(ctx, "savevm "+name)
}

// Restore puts the guest back as it was when [Machine.Save] took the
// snapshot name: every process, every file, every unit. The guest's clocks
// carry on from that moment too, so what runs in it sees no jump.
func (m *Machine) Restore(ctx context.Context, name string) error {
	return m.hmp(ctx, "loadvm "+name)
}

// hmp runs one human-monitor command through QMP, holding the agent's
// lock so no request is under way while the machine is stopped, saved or
// replaced. savevm and loadvm print nothing when they work and the reason
// when they do not, so any output is an error.
func (m *Machine) hmp(ctx context.Context, command string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.conn == nil {
		return fmt.Errorf("%s: machine is closed", command)
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", m.qmp)
	if err != nil {
		return fmt.Errorf("%s: qemu's monitor: %w", command, err)
	}
	defer c.Close()
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Now().Add(10 * time.Minute)
	}
	c.SetDeadline(dl)
	r := bufio.NewReader(c)
	// The greeting, then capabilities negotiation, then the command.
	if _, err := qmpReply(r); err != nil {
		return fmt.Errorf("%s: qemu's monitor greeting: %w", command, err)
	}
	for _, req := range []any{
		map[string]any{"execute": "qmp_capabilities"},
		map[string]any{"execute": "human-monitor-command", "arguments": map[string]string{"command-line": command}},
	} {
		b, _ := json.Marshal(req)
		if _, err := c.Write(append(b, '\n')); err != nil {
			return fmt.Errorf("%s: qemu's monitor: %w", command, err)
		}
		ret, err := qmpReply(r)
		if err != nil {
			return fmt.Errorf("%s: %w", command, err)
		}
		var out string
		if json.Unmarshal(ret, &out) == nil && strings.TrimSpace(out) != "" {
			return fmt.Errorf("%s: qemu: %s", command, strings.TrimSpace(out))
		}
	}
	return nil
}

// qmpReply reads QMP lines until a greeting, a return or an error,
// skipping asynchronous events (STOP, RESUME and the like).
func qmpReply(r *bufio.Reader) (json.RawMessage, error) {
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return nil, err
		}
		var msg struct {
			QMP    json.RawMessage `json:"QMP"`
			Return json.RawMessage `json:"return"`
			Error  *struct {
				Class string `json:"class"`
				Desc  string `json:"desc"`
			} `json:"error"`
		}
		if err := json.Unmarshal(line, &msg); err != nil {
			return nil, fmt.Errorf("qemu's monitor sent %q: %w", line, err)
		}
		switch {
		case msg.Error != nil:
			return nil, errors.New("qemu: " + msg.Error.Class + ": " + msg.Error.Desc)
		case msg.QMP != nil:
			return msg.QMP, nil
		case msg.Return != nil:
			return msg.Return, nil
		}
	}
}

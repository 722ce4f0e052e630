// Package sdnotify tells systemd how the service is doing, over the
// datagram socket named by NOTIFY_SOCKET (sd_notify(3)), with the
// standard library only. Outside systemd (no NOTIFY_SOCKET) every call is
// a no-op, so the daemon calls it unconditionally.
package sdnotify

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// The states this daemon sends; see sd_notify(3).
const (
	// StateReady says start-up is done: a Type=notify unit turns active.
	StateReady = "READY=1"
	// StateWatchdog keeps WatchdogSec= from restarting the service.
	StateWatchdog = "WATCHDOG=1"
	// StateStopping says the service is shutting down on purpose.
	StateStopping = "STOPPING=1"
	// StateReloading says a configuration reload has begun.
	StateReloading = "RELOADING=1"
)

// sendTimeout bounds one datagram: the socket is local and systemd reads
// it at once, so a send that waits longer would only stall the caller.
const sendTimeout = time.Second

// Notifier sends states to systemd's notification socket. A nil *Notifier,
// or one made without NOTIFY_SOCKET, sends nothing and returns nil.
type Notifier struct {
	addr *net.UnixAddr
}

// New returns the notifier for the socket named by NOTIFY_SOCKET in
// getenv, or nil when it is unset or not a unix socket path ("/…" or the
// abstract "@…"). A nil result is a valid no-op notifier.
func New(getenv func(string) string) *Notifier {
	if getenv == nil {
		return nil
	}
	name := getenv("NOTIFY_SOCKET")
	if name == "" || (name[0] != '/' && name[0] != '@') {
		return nil
	}
	// net maps a leading "@" to the abstract namespace's NUL byte.
	return &Notifier{addr: &net.UnixAddr{Name: name, Net: "unixgram"}}
}

// Enabled reports whether n sends anything.
func (n *Notifier) Enabled() bool { return n != nil && n.addr != nil }

// Notify sends state, one or more newline-separated VAR=value
// assignments, as one datagram. It returns ctx.Err() when ctx is done.
func (n *Notifier) Notify(ctx context.Context, state string) error {
	if !n.Enabled() {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if state == "" {
		return errors.New("sd_notify: empty state")
	}
	conn, err := net.DialUnix("unixgram", nil, n.addr)
	if err != nil {
		return fmt.Errorf("sd_notify: %w", err)
	}
	defer conn.Close()
	deadline := time.Now().Add(sendTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := conn.SetWriteDeadline(deadline); err != nil {
		return fmt.Errorf("sd_notify: %w", err)
	}
	if _, err := conn.Write([]byte(state)); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("sd_notify %s: %w", firstLine(state), err)
	}
	return nil
}

// Ready sends READY=1.
func (n *Notifier) Ready(ctx context.Context) error { return n.Notify(ctx, StateReady) }

// Watchdog sends WATCHDOG=1.
func (n *Notifier) Watchdog(ctx context.Context) error { return n.Notify(ctx, StateWatchdog) }

// Stopping sends STOPPING=1.
func (n *Notifier) Stopping(ctx context.Context) error { return n.Notify(ctx, StateStopping) }

// WatchdogInterval returns the watchdog timeout systemd set for this
// process (WATCHDOG_USEC), or 0 when there is none: unset, malformed, or
// meant for another process (WATCHDOG_PID set to another pid, as a child
// that inherited the environment would see). The service should send
// WATCHDOG=1 at least every half of it.
func WatchdogInterval(getenv func(string) string) time.Duration {
	return watchdogInterval(getenv, os.Getpid())
}

func watchdogInterval(getenv func(string) string, pid int) time.Duration {
	if getenv == nil {
		return 0
	}
	if p := getenv("WATCHDOG_PID"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n != pid {
			return 0
		}
	}
	usec, err := strconv.ParseUint(getenv("WATCHDOG_USEC"), 10, 63)
	if err != nil || usec == 0 || usec > uint64(1<<63-1)/uint64(time.Microsecond) {
		return 0
	}
	return time.Duration(usec) * time.Microsecond
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

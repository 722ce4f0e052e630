package sdnotify

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// listen opens a unixgram socket at name (a path, or "@…" for the
// abstract namespace), closed when the test ends.
func listen(t *testing.T, name string) *net.UnixConn {
	t.Helper()
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// recv reads one datagram, failing after a deadline instead of hanging.
func recv(t *testing.T, conn *net.UnixConn) string {
	t.Helper()
	if err := conn.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	n, err := conn.Read(buf)
	if err != nil {
		t.Fatalf("no datagram: %v", err)
	}
	return string(buf[:n])
}

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestSDNotifySendsExactStates(t *testing.T) {
	t.Parallel()
	abstract := "@riskguard-sdnotify-test-" + strconv.Itoa(os.Getpid())
	for _, socket := range []struct{ name, addr string }{
		{"path", filepath.Join(t.TempDir(), "notify.sock")},
		{"abstract", abstract},
	} {
		t.Run(socket.name, func(t *testing.T) {
			conn := listen(t, socket.addr)
			n := New(env(map[string]string{"NOTIFY_SOCKET": socket.addr}))
			if !n.Enabled() {
				t.Fatalf("New(%q) is disabled", socket.addr)
			}
			ctx := context.Background()
			for _, tc := range []struct {
				name string
				send func() error
				want string
			}{
				{"ready", func() error { return n.Ready(ctx) }, "READY=1"},
				{"watchdog", func() error { return n.Watchdog(ctx) }, "WATCHDOG=1"},
				{"stopping", func() error { return n.Stopping(ctx) }, "STOPPING=1"},
				{"several", func() error { return n.Notify(ctx, "RELOADING=1\nSTATUS=reloading") }, "RELOADING=1\nSTATUS=reloading"},
			} {
				if err := tc.send(); err != nil {
					t.Fatalf("%s: %v", tc.name, err)
				}
				if got := recv(t, conn); got != tc.want {
					t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
				}
			}
		})
	}
}

func TestSDNotifyNoSocketIsNoOp(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		getenv func(string) string
	}{
		{"nil getenv", nil},
		{"unset", env(nil)},
		{"relative path", env(map[string]string{"NOTIFY_SOCKET": "notify.sock"})},
		{"vsock", env(map[string]string{"NOTIFY_SOCKET": "vsock:2:1234"})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := New(tc.getenv)
			if n.Enabled() {
				t.Fatal("enabled without a usable NOTIFY_SOCKET")
			}
			if err := n.Ready(context.Background()); err != nil {
				t.Errorf("Ready: %v", err)
			}
		})
	}
	var n *Notifier
	if err := n.Stopping(context.Background()); err != nil {
		t.Errorf("nil Notifier: %v", err)
	}
}

func TestSDNotifyErrors(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "notify.sock")
	listen(t, path)
	n := New(env(map[string]string{"NOTIFY_SOCKET": path}))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := n.Ready(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled ctx: got %v, want context.Canceled", err)
	}
	if err := n.Notify(context.Background(), ""); err == nil {
		t.Error("empty state: no error")
	}
	gone := New(env(map[string]string{"NOTIFY_SOCKET": filepath.Join(t.TempDir(), "absent.sock")}))
	if err := gone.Ready(context.Background()); err == nil {
		t.Error("absent socket: no error")
	}
}

func TestSDNotifyWatchdogInterval(t *testing.T) {
	t.Parallel()
	const pid = 4242
	for _, tc := range []struct {
		name string
		env  map[string]string
		want time.Duration
	}{
		{"unset", nil, 0},
		{"usec", map[string]string{"WATCHDOG_USEC": "30000000"}, 30 * time.Second},
		{"our pid", map[string]string{"WATCHDOG_USEC": "1500", "WATCHDOG_PID": "4242"}, 1500 * time.Microsecond},
		{"another pid", map[string]string{"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "1"}, 0},
		{"bad pid", map[string]string{"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "x"}, 0},
		{"zero", map[string]string{"WATCHDOG_USEC": "0"}, 0},
		{"negative", map[string]string{"WATCHDOG_USEC": "-5"}, 0},
		{"garbage", map[string]string{"WATCHDOG_USEC": "30s"}, 0},
		{"overflow", map[string]string{"WATCHDOG_USEC": "9223372036854775807"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := watchdogInterval(env(tc.env), pid); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	if got := WatchdogInterval(env(map[string]string{"WATCHDOG_USEC": "2000000", "WATCHDOG_PID": strconv.Itoa(os.Getpid())})); got != 2*time.Second {
		t.Errorf("WatchdogInterval for this process: got %v, want 2s", got)
	}
	if got := WatchdogInterval(nil); got != 0 {
		t.Errorf("nil getenv: got %v", got)
	}
}

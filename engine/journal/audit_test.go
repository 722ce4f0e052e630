package journal

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fullFile is an audit file on a disk that fills up: with full set, a write
// stores its first half (a torn line) and fails with ENOSPC; with
// noTruncate, the torn half cannot be cut off either.
type fullFile struct {
	*os.File
	full, noTruncate bool
}

func (f *fullFile) Write(p []byte) (int, error) {
	if !f.full {
		return f.File.Write(p)
	}
	n, _ := f.File.Write(p[:len(p)/2])
	return n, &os.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
}

func (f *fullFile) Truncate(size int64) error {
	if f.noTruncate {
		return errors.New("read-only")
	}
	return f.File.Truncate(size)
}

// fullAudit opens an audit log in a temporary directory on a fullFile,
// room left until the test fills it.
func fullAudit(t *testing.T) (string, *Audit, *fullFile) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	var file *fullFile
	a, err := openAuditWith(path, func(p string) (auditFile, error) {
		f, err := openAuditFile(p)
		if err != nil {
			return nil, err
		}
		file = &fullFile{File: f.(*os.File)}
		return file, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return path, a, file
}

// readAudit returns the audit file's records, failing on any line that is
// not one whole record; with fragments, a line that is the start of one
// (a torn write that could not be cut off) is skipped.
func readAudit(t *testing.T, path string, fragments ...bool) []Record {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []Record
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var r Record
		err := json.Unmarshal(sc.Bytes(), &r)
		if err != nil && len(fragments) > 0 && fragments[0] && bytes.HasPrefix(sc.Bytes(), []byte(`{"time":`)) && !bytes.Contains(sc.Bytes(), []byte("}{")) {
			continue
		}
		if err != nil {
			t.Fatalf("line %q is no record (torn or glued): %v", sc.Text(), err)
		}
		out = append(out, r)
	}
	return out
}

func reasons(rs []Record) string {
	var b strings.Builder
	for _, r := range rs {
		b.WriteString(r.Reason + ";")
	}
	return b.String()
}

// A full disk: the records are kept, no torn line is left or glued to the
// next, and everything is written, in order, once the disk has room.
func TestAuditFullDiskKeepsRecords(t *testing.T) {
	t.Parallel()
	for _, noTruncate := range []bool{false, true} {
		path, a, file := fullAudit(t)
		file.noTruncate = noTruncate
		rec := func(n string) Record { return Record{Time: time.Unix(0, 0).UTC(), Type: "test", Reason: n} }
		if err := a.Write(rec("1")); err != nil {
			t.Fatal(err)
		}
		file.full = true
		for _, n := range []string{"2", "3"} {
			if err := a.Write(rec(n)); err == nil || !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "kept") {
				t.Fatalf("write on a full disk: %v, want ENOSPC and the records kept", err)
			}
		}
		if a.Backlog() != 2 {
			t.Errorf("backlog = %d, want 2", a.Backlog())
		}
		file.full = false
		if err := a.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := a.Write(rec("4")); err != nil {
			t.Fatal(err)
		}
		if got := reasons(readAudit(t, path, noTruncate)); got != "1;2;3;4;" {
			t.Errorf("noTruncate=%t: records %q, want 1;2;3;4; in order", noTruncate, got)
		}
		a.Close()
	}
}

// A deleted or rotated (renamed) audit log is recreated at its path at the
// next write; Reopen (SIGHUP) reopens it at once.
func TestAuditFollowsItsPath(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.jsonl")
	a, err := OpenAudit(path)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	w := func(n string) {
		t.Helper()
		if err := a.Write(Record{Type: "test", Reason: n}); err != nil {
			t.Fatal(err)
		}
	}
	w("1")
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	w("2")
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	w("3")
	if got := reasons(readAudit(t, path+".1")); got != "1;" {
		t.Errorf("rotated file: %q, want 1;", got)
	}
	if got := reasons(readAudit(t, path)); got != "3;" {
		t.Errorf("recreated file: %q, want 3; (2 went to the file deleted after it)", got)
	}
	if err := os.Rename(path, path+".2"); err != nil {
		t.Fatal(err)
	}
	if err := a.Reopen(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("Reopen did not create the file: %v", err)
	}
}

// The backlog is bounded: the oldest records go, and a record says how
// many were lost once the log takes records again.
func TestAuditBacklogBounded(t *testing.T) {
	t.Parallel()
	path, a, file := fullAudit(t)
	file.full = true
	defer a.Close()
	for i := range MaxAuditBacklog + 5 {
		_ = a.Write(Record{Type: "test", Reason: "r", Leverage: i})
	}
	if a.Backlog() != MaxAuditBacklog {
		t.Fatalf("backlog = %d, want %d", a.Backlog(), MaxAuditBacklog)
	}
	file.full = false
	if err := a.Flush(); err != nil {
		t.Fatal(err)
	}
	rs := readAudit(t, path)
	if len(rs) != MaxAuditBacklog+1 || rs[0].Type != "audit" || !strings.Contains(rs[0].Reason, "5 audit records were lost") || rs[1].Leverage != 5 {
		t.Errorf("%d records, first %+v, second %+v; want the loss said, then records from the 6th", len(rs), rs[0], rs[1])
	}
}

// An order whose answer was lost stays unfinished until a settled record
// of its action and symbol, written by the later tick whose read settled
// it: a restart after that adopts nothing (it once said "left without a
// recorded outcome" of an order settled long before, issue 37).
func TestUnfinishedClosedBySettled(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	sent := Record{Time: t0, Type: "action", Action: "reduce_position", Symbol: "XSOL", Phase: "sent"}
	lost := Record{Time: t0, Type: "action", Action: "reduce_position", Symbol: "XSOL", Phase: "error", Error: "outcome unknown: EOF"}
	settled := func(sym string) Record {
		return Record{Time: t0.Add(4 * time.Second), Type: "action", Action: "reduce_position", Symbol: sym, Phase: "settled"}
	}
	for _, tc := range []struct {
		name string
		recs []Record
		want int
	}{
		{"answer lost", []Record{sent, lost}, 1},
		{"settled by a later read", []Record{sent, lost, settled("XSOL")}, 0},
		{"another symbol settled", []Record{sent, lost, settled("XBTC")}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "audit.jsonl")
			var b []byte
			for _, r := range tc.recs {
				line, err := json.Marshal(r)
				if err != nil {
					t.Fatal(err)
				}
				b = append(append(b, line...), '\n')
			}
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := Unfinished(path)
			if err != nil || len(got) != tc.want {
				t.Errorf("Unfinished = %+v, %v; want %d", got, err, tc.want)
			}
		})
	}
}

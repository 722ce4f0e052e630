//go:build unix

package engine

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// lockState takes an exclusive lock on the state file's lock file
// (PATH.lock), holding the process id: two guards on one state file — and
// so one account — would both act. The lock goes with the process, so a
// killed daemon never leaves it held.
func lockState(path string) (*os.File, error) {
	name := path + ".lock"
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("state lock: %w", err)
	}
	if err := flockRetry(f); err != nil {
		holder, _ := os.ReadFile(name)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &StateLockedError{Path: path, PID: strings.TrimSpace(string(holder))}
		}
		return nil, fmt.Errorf("state lock %s: %w", name, err)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// lockTries and lockPause bound how long lockState keeps trying a lock
// another holder has (about a second). A lock is released when the last
// descriptor of its open file goes, and a child process forked in the
// instant the holder closes it keeps one until it execs: a lock just
// released by a stopping guard of this very process (a restart in place, a
// test) can still be held for that instant.
const (
	lockTries = 20
	lockPause = 50 * time.Millisecond
)

// flockRetry takes f's exclusive lock, trying again while another holder
// has it, lockTries times at most.
func flockRetry(f *os.File) error {
	for try := 1; ; try++ {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EWOULDBLOCK) || try == lockTries {
			return err
		}
		time.Sleep(lockPause)
	}
}

//go:build !unix

package engine

import "os"

// lockState does not lock where flock is not available.
func lockState(string) (*os.File, error) { return nil, nil }

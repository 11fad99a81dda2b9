package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/agentproto/handoff"
)

// unixFlag is an optional evaluation time in Unix seconds.
type unixFlag struct {
	set bool
	sec int64
}

func (u *unixFlag) String() string {
	if u == nil || !u.set {
		return ""
	}
	return strconv.FormatInt(u.sec, 10)
}

func (u *unixFlag) Set(s string) error {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return fmt.Errorf("want Unix seconds, an unsigned integer")
	}
	if n > math.MaxInt64 {
		return fmt.Errorf("%d is beyond what a clock can show (2^63-1 seconds)", n)
	}
	u.set, u.sec = true, int64(n)
	return nil
}

// time returns the flag's time, or the zero time when it was not given.
func (u *unixFlag) time() time.Time {
	if !u.set {
		return time.Time{}
	}
	return time.Unix(u.sec, 0)
}

// clock returns a clock stopped at the flag's time, or time.Now.
func (u *unixFlag) clock() func() time.Time {
	if !u.set {
		return time.Now
	}
	t := time.Unix(u.sec, 0)
	return func() time.Time { return t }
}

// secondsFlag is a whole number of seconds, written "60" or as a Go
// duration ("60s", "2m").
type secondsFlag struct{ d time.Duration }

func (s *secondsFlag) String() string {
	if s == nil {
		return ""
	}
	return strconv.FormatInt(int64(s.d/time.Second), 10)
}

func (s *secondsFlag) Set(v string) error {
	var d time.Duration
	if n, err := strconv.ParseUint(v, 10, 32); err == nil {
		d = time.Duration(n) * time.Second
	} else {
		var perr error
		if d, perr = time.ParseDuration(v); perr != nil {
			return fmt.Errorf("want seconds (60) or a duration (60s, 2m)")
		}
	}
	if d < 0 {
		return fmt.Errorf("negative duration")
	}
	if d%time.Second != 0 {
		return fmt.Errorf("want whole seconds")
	}
	s.d = d
	return nil
}

// listFlag collects the values of a repeated flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	*l = append(*l, v)
	return nil
}

func parseFormat(s string) (handoff.Format, error) {
	switch s {
	case "jws":
		return handoff.JWS, nil
	case "cose":
		return handoff.COSE, nil
	}
	return 0, fmt.Errorf("--format %q: want jws or cose", s)
}

func parseEncoding(s string) (handoff.Encoding, error) {
	switch s {
	case "json":
		return handoff.JSON, nil
	case "cbor":
		return handoff.CBOR, nil
	}
	return 0, fmt.Errorf("--encoding %q: want json or cbor", s)
}

// The receiver's defaults that offer, inspect and verify apply: the
// draft's recommendations, which a handoff.Config whose fields are left
// zero applies too.
const (
	defaultSkew        = 60 * time.Second  // HC-31
	defaultMaxLifetime = 300 * time.Second // HC-32
	defaultMaxChain    = 16                // HC-50
)

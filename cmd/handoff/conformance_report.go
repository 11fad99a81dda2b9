package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"strings"
)

// conformanceReport is the outcome of a run: every vector's result, the
// counts per level, and whether the run passed.
type conformanceReport struct {
	SuiteVersion string                 `json:"suite_version"`
	Command      []string               `json:"command"`
	Lacks        []string               `json:"lacks"`
	Strict       bool                   `json:"strict"`
	OK           bool                   `json:"ok"`
	Total        levelCount             `json:"total"`
	Levels       map[string]*levelCount `json:"levels"`
	Vectors      []vectorResult         `json:"vectors"`
}

type levelCount struct {
	Vectors int `json:"vectors"`
	Passed  int `json:"passed"`
	Failed  int `json:"failed"`
	Skipped int `json:"skipped"`
}

func (c *levelCount) add(status string) {
	c.Vectors++
	switch status {
	case vectorPass:
		c.Passed++
	case vectorFail:
		c.Failed++
	case vectorSkip:
		c.Skipped++
	}
}

func newReport(results []vectorResult, strict bool, version string, command, lacks []string) *conformanceReport {
	r := &conformanceReport{SuiteVersion: version, Command: command, Lacks: lacks, Strict: strict, OK: true,
		Levels: map[string]*levelCount{}, Vectors: results}
	if r.Lacks == nil {
		r.Lacks = []string{}
	}
	for _, l := range levels {
		r.Levels[l] = &levelCount{}
	}
	for _, v := range results {
		r.Total.add(v.Status)
		if c := r.Levels[v.Level]; c != nil {
			c.add(v.Status)
		}
		if v.fails(strict) {
			r.OK = false
		}
	}
	return r
}

// text writes one line per vector, one per level, then the summary line.
func (r *conformanceReport) text(w io.Writer) {
	for _, v := range r.Vectors {
		line := fmt.Sprintf("%s %s [%s]: acceptable %s; actual %s", v.Status, v.File, v.Level, v.Acceptable, v.Actual)
		if v.Problem != "" {
			line += "; " + v.Problem
		}
		if v.Detail != "" && v.Status == vectorFail {
			line += " (" + oneLine(v.Detail, 160) + ")"
		}
		fmt.Fprintln(w, line)
	}
	for _, l := range levels {
		c := r.Levels[l]
		if c.Vectors == 0 {
			continue
		}
		note := "not met: reported, not failed"
		if l == "MUST" || r.Strict {
			note = "a failure fails the run"
		}
		fmt.Fprintf(w, "%-6s %d vectors: %d passed, %d failed, %d skipped (%s)\n", l, c.Vectors, c.Passed, c.Failed, c.Skipped, note)
	}
	verdict := "conforming on every vector run"
	if !r.OK {
		verdict = "NOT conforming"
	}
	fmt.Fprintf(w, "%d vectors: %d passed, %d failed (%d MUST), %d skipped (features the command lacks): %s\n",
		r.Total.Vectors, r.Total.Passed, r.Total.Failed, r.Levels["MUST"].Failed, r.Total.Skipped, verdict)
}

func (r *conformanceReport) json(b *bytes.Buffer) error {
	e := json.NewEncoder(b)
	e.SetEscapeHTML(false)
	e.SetIndent("", "  ")
	return e.Encode(r)
}

// JUnit XML, as CI systems read it: one testsuite per level. A failure
// that fails the run is a <failure>; a SHOULD, MAY or open vector not met
// (without --strict) is reported as <skipped> with the reason, since it
// is reported and does not fail the run; so is a vector the command
// declared it cannot run.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Failure   *junitMessage `xml:"failure,omitempty"`
	Skipped   *junitMessage `xml:"skipped,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

func (r *conformanceReport) junit(b *bytes.Buffer) error {
	all := junitSuites{Name: "handoff conformance " + r.SuiteVersion}
	for _, l := range levels {
		s := junitSuite{Name: "handoff conformance " + l}
		for _, v := range r.Vectors {
			if v.Level != l {
				continue
			}
			c := junitCase{Name: v.File, Classname: "handoff.conformance." + l,
				SystemOut: fmt.Sprintf("acceptable: %s\nactual: %s", v.Acceptable, v.Actual)}
			msg := strings.TrimPrefix(strings.TrimSpace(v.Actual+"; "+v.Problem), "; ")
			switch {
			case v.Status == vectorPass:
			case v.fails(r.Strict):
				c.Failure = &junitMessage{Message: msg, Text: v.Detail}
				s.Failures++
			case v.Status == vectorSkip:
				c.Skipped = &junitMessage{Message: v.Actual}
				s.Skipped++
			default:
				c.Skipped = &junitMessage{Message: l + " not met (reported, not failed): " + msg, Text: v.Detail}
				s.Skipped++
			}
			s.Cases = append(s.Cases, c)
			s.Tests++
		}
		if s.Tests > 0 {
			all.Suites = append(all.Suites, s)
			all.Tests += s.Tests
			all.Failures += s.Failures
			all.Skipped += s.Skipped
		}
	}
	b.WriteString(xml.Header)
	e := xml.NewEncoder(b)
	e.Indent("", "  ")
	if err := e.Encode(all); err != nil {
		return err
	}
	b.WriteString("\n")
	return nil
}

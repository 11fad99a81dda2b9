package evidence

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"
)

func testBinding(t *testing.T) Binding {
	hop, err := handoff.NewHopID(nil)
	require.NoError(t, err)
	return Binding{Hop: hop, Iss: triage, Aud: payments, Iat: t0, Exp: t0 + 120}
}

func TestBuild_BindsToOffer(t *testing.T) {
	bind := testBinding(t)
	built, err := NewBuilder(refundPackage()).Build(bind, BuildOptions{Time: time.Unix(t0+5, 0)})
	require.NoError(t, err)
	p := built.Package
	require.Equal(t, string(bind.Hop), p.Handoff.ID)
	require.Equal(t, string(triage), p.Sender.Agent)
	require.Equal(t, string(payments), p.Receiver.Agent)
	require.Equal(t, time.Unix(t0+5, 0).UTC(), p.Handoff.Time)
	require.Equal(t, Kind, built.Ref.Kind)
	d, err := Digest(built.Encoded, DecodeOptions{})
	require.NoError(t, err)
	require.True(t, d.Equal(built.Ref.Dig))
}

func TestBuild_RefusesTimeOutsideWindowAndBadBinding(t *testing.T) {
	bind := testBinding(t)
	for _, at := range []int64{t0 - 1, t0 + 121} {
		_, err := NewBuilder(refundPackage()).Build(bind, BuildOptions{Time: time.Unix(at, 0)})
		require.ErrorIs(t, err, ErrUnbound)
	}
	bad := bind
	bad.Hop = "short"
	_, err := NewBuilder(refundPackage()).Build(bad, BuildOptions{})
	require.ErrorIs(t, err, ErrUnbound)
	bad = bind
	bad.Exp = bad.Iat
	_, err = NewBuilder(refundPackage()).Build(bad, BuildOptions{})
	require.ErrorIs(t, err, ErrUnbound)
}

// HC-62: each credential shape is refused, wherever it sits, and the error
// names the pattern and the path, never the value.
func TestBuild_HC62_RefusesCredentialLikeStrings(t *testing.T) {
	cases := []struct {
		pattern Pattern
		value   string
	}{
		{PatternPEMPrivateKey, "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg\n-----END PRIVATE KEY-----"},
		{PatternPEMPrivateKey, "-----BEGIN RSA PRIVATE KEY-----"},
		{PatternPEMPrivateKey, "-----BEGIN OPENSSH PRIVATE KEY-----"},
		{PatternJWT, "token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"},
		{PatternBearer, "Authorization: Bearer 0123456789abcdefghijKLMNOP"},
		{PatternBearer, "basic dXNlcjpwYXNzd29yZDEyMzQ1Ng=="},
		{PatternAWSAccessKey, "AKIAIOSFODNN7EXAMPLE"},
		{PatternAWSSecret, "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"},
		{PatternGCPAPIKey, "AIzaSyA-abcdefghijklmnopqrstuvwxyz01234"},
		{PatternAzureKey, "DefaultEndpointsProtocol=https;AccountName=x;AccountKey=" + repeat("A", 86) + "=="},
		{PatternAzureKey, "https://x.blob.core.windows.net/c?sv=2020&sig=" + repeat("a", 43)},
		{PatternGitHubToken, "ghp_" + repeat("a", 36)},
		{PatternGitHubToken, "github_pat_" + repeat("B", 30)},
		{PatternSlackToken, "xoxb-123456789012-abcdefghij"},
		{PatternSlackToken, "https://hooks.slack.com/services/T000/B000/XXXXXXXX"},
		{PatternStripeKey, "sk_live_" + repeat("a", 24)},
		{PatternStripeKey, "whsec_" + repeat("z", 24)},
		{PatternPasswordField, "login with password: hunter2"},
		{PatternURLCredentials, "postgres://ops:s3cret@db.internal/ledger"},
	}
	for _, c := range cases {
		t.Run(string(c.pattern), func(t *testing.T) {
			p := refundPackage()
			p.Assumptions = append(p.Assumptions, Assumption{Item: c.value, Validation: "none"})
			_, err := NewBuilder(p).Build(testBinding(t), BuildOptions{})
			require.ErrorIs(t, err, ErrRestricted)
			var re *RestrictedError
			require.True(t, errors.As(err, &re))
			require.Contains(t, re.Hits, Hit{Pattern: c.pattern, Path: "/assumptions/1/item"})
			require.NotContains(t, err.Error(), c.value)
		})
	}
}

// The password-field rule looks at member names too, and at passed
// context items named like a credential.
func TestBuild_HC62_PasswordFields(t *testing.T) {
	p := refundPackage()
	p.Extra = Extra{"x-login": []byte(`{"user":"ops","api-key":"k-123"}`)}
	_, err := NewBuilder(p).Build(testBinding(t), BuildOptions{})
	var re *RestrictedError
	require.True(t, errors.As(err, &re))
	require.Contains(t, re.Hits, Hit{PatternPasswordField, "/x-login/api-key"})

	p = refundPackage()
	p.Passed = append(p.Passed, ContextItem{Name: "client_secret", Value: "abc"})
	_, err = NewBuilder(p).Build(testBinding(t), BuildOptions{})
	require.True(t, errors.As(err, &re))
	require.Contains(t, re.Hits, Hit{PatternPasswordField, "/context_passed/2/value"})

	// An empty password member says nothing secret.
	p = refundPackage()
	p.Extra = Extra{"x-login": []byte(`{"password":""}`)}
	_, err = NewBuilder(p).Build(testBinding(t), BuildOptions{})
	require.NoError(t, err)
}

// HC-62: the value of a withheld item never rides in the package.
func TestBuild_HC62_RefusesWithheldValue(t *testing.T) {
	p := refundPackage()
	p.Attempts = append(p.Attempts, Attempt{Attempt: "charge back to card 4111111111111111", Result: "not tried"})
	_, err := NewBuilder(p).Withhold("card_number", "PCI", []byte("4111111111111111")).Build(testBinding(t), BuildOptions{})
	var re *RestrictedError
	require.True(t, errors.As(err, &re))
	require.Equal(t, []Hit{{PatternWithheldValue, "/attempts/1/attempt"}}, re.Hits)
	require.NotContains(t, err.Error(), "4111111111111111")

	// Withheld: the item and its reason travel, the value does not.
	built, err := NewBuilder(refundPackage()).Withhold("card_number", "PCI", []byte("4111111111111111")).Build(testBinding(t), BuildOptions{})
	require.NoError(t, err)
	require.Equal(t, []Withheld{{Item: "card_number", Reason: "PCI"}}, built.Package.Withheld)
	require.NotContains(t, string(built.Encoded), "4111111111111111")

	_, err = NewBuilder(refundPackage()).Withhold("pin", "PCI", []byte("123")).Build(testBinding(t), BuildOptions{})
	require.ErrorIs(t, err, ErrMalformed)
}

// Ordinary business text is not taken for a credential.
func TestBuild_NoFalsePositivesOnCleanPackage(t *testing.T) {
	hits, err := scan(mustEncode(t, refundPackage()), nil, nil)
	require.NoError(t, err)
	require.Empty(t, hits)
}

func mustEncode(t *testing.T, p Package) []byte {
	b, err := p.Encode()
	require.NoError(t, err)
	return b
}

func repeat(s string, n int) string {
	out := ""
	for range n {
		out += s
	}
	return out
}

// An empty package is refused by Build, with every field the receiver's
// check would report missing named as the Go field to set, rather than
// accepted and then rejected by the receiver.
func TestBuild_RefusesIncompletePackage(t *testing.T) {
	_, err := NewBuilder(Package{}).Build(testBinding(t), BuildOptions{})
	require.ErrorIs(t, err, ErrMalformed)
	require.ErrorIs(t, err, handoff.ErrArgument)
	var ie *IncompleteError
	require.True(t, errors.As(err, &ie))
	var paths []string
	for _, f := range ie.Missing {
		paths = append(paths, f.Path)
	}
	require.Equal(t, []string{"/sender/role", "/receiver/role", "/control", "/outcome/result", "/outcome/done_when",
		"/authority/allowed", "/state", "/next_action/action", "/verification/check", "/timeouts", "/rollback/method"}, paths)
	require.Equal(t, "evidence: package incomplete: set Package.Sender.Role, Package.Receiver.Role, Package.Control, "+
		"Package.Outcome.Result, Package.Outcome.DoneWhen, Package.Authority.Allowed (at least one entry), "+
		"Package.State (at least one entry), Package.Next.Action, Package.Verification.Check, "+
		"Package.Timeouts (at least one entry), Package.Rollback.Method", err.Error())
}

// Fields inside a list's entries are named with their index, and the
// conditional requirements say what to set.
func TestBuild_IncompleteNamesEntryFields(t *testing.T) {
	p := refundPackage()
	p.State[0].AsOf = time.Time{}
	p.Completed[0].IdempotencyKey = ""
	p.Pending = nil
	p.Timeouts[0].Owner = ""
	p.Artifacts[1].Ref = WireRef{}
	_, err := NewBuilder(p).Build(testBinding(t), BuildOptions{})
	var ie *IncompleteError
	require.True(t, errors.As(err, &ie), "%v", err)
	require.ErrorIs(t, err, handoff.ErrArgument)
	require.Equal(t, "evidence: package incomplete: set Package.State[0].AsOf, "+
		"Pending: an approval with an Owner and, as Action, the must-ask action Package.Authority.MustAsk[0], "+
		"Package.Artifacts[1].Ref, "+
		"Package.Completed[0].OperationID or Package.Completed[0].IdempotencyKey (the action had an external effect), "+
		"Package.Timeouts[0].Owner", err.Error())
}

// A package with thousands of defects is refused in a bounded message,
// which counts the fields it does not list.
func TestBuild_IncompleteIsBounded(t *testing.T) {
	p := refundPackage()
	p.Assumptions = make([]Assumption, 100)
	_, err := NewBuilder(p).Build(testBinding(t), BuildOptions{})
	var ie *IncompleteError
	require.True(t, errors.As(err, &ie))
	require.Len(t, ie.Missing, maxFindings+1)
	require.Equal(t, CodeMoreFindings, ie.Missing[maxFindings].Code)
	require.True(t, strings.HasSuffix(err.Error(), ", and more (136 more findings not listed)"), err.Error())
}

// The template marks as "required" exactly the fields Build refuses a
// package without: each field reported absent in an empty package, or in
// one whose lists hold one empty entry each, is so marked, and each field
// so marked is reported.
func TestTemplate_MarksWhatBuildRequires(t *testing.T) {
	var tmpl any
	require.NoError(t, jsonUnmarshal(Template(), &tmpl))
	marked := map[string]string{} // JSON Pointer -> description
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				walk(path+"/"+k, e)
			}
		case []any:
			for i, e := range v {
				walk(path+"/"+strconv.Itoa(i), e)
			}
		case string:
			if strings.HasPrefix(v, "<required") {
				marked[path] = v
			}
		}
	}
	walk("", tmpl)
	isObject := func(path string) bool {
		v := tmpl
		for seg := range strings.SplitSeq(strings.TrimPrefix(path, "/"), "/") {
			switch e := v.(type) {
			case map[string]any:
				v = e[seg]
			case []any:
				i, err := strconv.Atoi(seg)
				require.NoError(t, err)
				v = e[i]
			}
		}
		_, ok := v.(map[string]any)
		return ok
	}

	oneEach := Package{State: make([]StateClaim, 1), Completed: make([]CompletedAction, 1), Artifacts: make([]Artifact, 1),
		Passed: make([]ContextItem, 1), Withheld: make([]Withheld, 1), Assumptions: make([]Assumption, 1),
		Attempts: make([]Attempt, 1), Pending: make([]Pending, 1), Timeouts: make([]Timeout, 1)}
	reported := map[string]bool{}
	for _, p := range []Package{{}, oneEach} {
		for _, f := range absent(&p) {
			reported[f.Path] = true
			found := false
			for m, desc := range marked {
				under := strings.HasPrefix(m, f.Path+"/")
				if m == f.Path || under && (isObject(f.Path) || strings.Contains(desc, "at least one")) {
					found = true
				}
			}
			require.True(t, found, "%s is required but not marked so in the template", f.Path)
		}
	}
	for m, desc := range marked {
		list, entry := m, false // the list an "at least one" mark is of
		if strings.Contains(desc, "at least one") {
			list = m[:strings.LastIndex(m, "/")]
			if !strings.HasSuffix(list, "/allowed") {
				list, entry = list[:strings.LastIndex(list, "/")], true
			}
			require.True(t, reported[list], "%s is marked 'at least one' but Build accepts an empty %s", m, list)
			if !entry {
				continue
			}
		}
		covered := reported[m]
		for p := range reported {
			covered = covered || (strings.HasPrefix(m, p+"/") && isObject(p))
		}
		require.True(t, covered, "%s is marked required but Build does not require it", m)
	}
}

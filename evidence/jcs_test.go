package evidence

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gowebpki/jcs"
	"github.com/stretchr/testify/require"
)

// The one-pass canonical form is byte for byte the one gowebpki/jcs makes
// (RFC 8785), on the vectors and on the cases where JCS is subtle: member
// order by UTF-16 code units (a supplementary character sorts before
// U+E000..U+FFFF), ECMAScript numbers, minimal string escapes, nesting.
func TestCanonicalize_AgreesWithJCS(t *testing.T) {
	inputs := []string{
		`{"b":1,"a":2,"aa":3,"":4}`,
		`{"\ud83d\ude00":1,"\ue000":2,"\uffff":3,"z":4,"é":5}`,
		`{"n":[1.0,-0,0.1,1e20,1e21,1e-7,123456789012345678,-1.5e300,5e-324,100,1E2,0.000001]}`,
		`{"s":"\u0000\u001f\"\\\/\b\f\n\r\t\u007f\u2028 é \ud83d\ude00"}`,
		`{"x":{"z":{"b":[{"d":1,"c":2}],"a":null},"y":true,"w":false}}`,
		`{ "a" : [ ] , "b" : { } , "c" : "" }`,
	}
	vectors, err := filepath.Glob("testdata/valid-*.json")
	require.NoError(t, err)
	for _, v := range vectors {
		b, err := os.ReadFile(v)
		require.NoError(t, err)
		inputs = append(inputs, string(b))
	}
	inputs = append(inputs, string(costPackage(t, refundPackage(), true, 50, 0)))
	for _, in := range inputs {
		want, err := jcs.Transform([]byte(in))
		require.NoError(t, err, in)
		_, got, err := canonicalize([]byte(in))
		require.NoError(t, err, in)
		require.Equal(t, string(want), string(got), in)
	}
}

// Duplicate names are found at any depth, by the unescaped name.
func TestCanonicalize_DuplicateNames(t *testing.T) {
	for _, in := range []string{`{"a":1,"a":2}`, `{"x":{"b":1,"c":2,"b":3}}`, `{"a":1,"\u0061":2}`, `[{"k":1},{"k":2,"k":3}]`} {
		_, _, err := canonicalize([]byte(in))
		require.ErrorIs(t, err, ErrDuplicateName, in)
		require.ErrorIs(t, err, ErrMalformed, in)
	}
	_, _, err := canonicalize([]byte(`[{"k":1},{"k":2}]`))
	require.NoError(t, err)
}

// FuzzCanonicalize: whatever the one-pass canonicalization accepts,
// gowebpki/jcs accepts too and canonicalizes to the same octets.
func FuzzCanonicalize(f *testing.F) {
	f.Add([]byte(`{"b":[1.0,{"d":"\u00e9","c":-0}],"a":"x"}`))
	f.Add([]byte(`{"\ud83d\ude00":1,"\ue000":2}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		_, got, err := canonicalize(in)
		if err != nil {
			return
		}
		want, err := jcs.Transform(in)
		require.NoError(t, err)
		require.Equal(t, string(want), string(got))
	})
}

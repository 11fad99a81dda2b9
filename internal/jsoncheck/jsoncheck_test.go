package jsoncheck

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// jsontextVerdict reads b with jsontext as one JSON text, with duplicate
// names allowed and refused, and says whether it nested too deep.
func jsontextVerdict(b []byte) (validDup, valid, tooDeep bool) {
	read := func(opts ...jsontext.Options) (bool, error) {
		d := jsontext.NewDecoder(bytes.NewReader(b), opts...)
		if _, err := d.ReadValue(); err != nil {
			return false, err
		}
		_, err := d.ReadToken()
		return err == io.EOF, nil // nothing follows
	}
	validDup, err := read(jsontext.AllowDuplicateNames(true))
	valid, _ = read()
	return validDup, valid, err != nil && strings.Contains(err.Error(), "exceeded max depth")
}

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		in  string
		dup string // the name reported, or "" for none
	}{
		{`{}`, ""},
		{`{"a":1,"b":2}`, ""},
		{`{"a":1,"a":2}`, "a"},
		{`{"a":1,"\u0061":2}`, "a"},
		{`{"\u00e9":1,"é":2}`, "é"},
		{`{"\ud83d\ude00":1,"😀":2}`, "😀"},
		{`{"\/":1,"/":2}`, "/"},
		{`{"\n":1,"\u000a":2}`, "\n"},
		{`{"a":{"a":1},"b":{"a":1}}`, ""},
		{`{"a":{"b":1,"b":2}}`, "b"},
		{`[{"a":1},{"a":1}]`, ""},
		{`[{"a":1,"a":1}]`, "a"},
		{`{"a":[{"x":1}],"a":2}`, "a"},
		{`{"a":"\"a\":1","a\"":2}`, ""},
		{`{"x":{"y":{}},"y":1,"x":2}`, "x"},
		{` { "a" : 1 , "b" : { "a" : 2 } , "c" : 3 } `, ""},
		{`"a"`, ""},
		{`[1,"a",{"a":[]},-0.5e+3,true,false,null]`, ""},
	} {
		_, valid, _ := jsontextVerdict([]byte(c.in))
		err := Check([]byte(c.in))
		assert.Equal(t, valid, err == nil, "jsontext and Check agree on %s: %v", c.in, err)
		if c.dup == "" {
			assert.NoError(t, err, c.in)
			continue
		}
		var de *DuplicateError
		require.True(t, errors.As(err, &de), "%s: %v", c.in, err)
		assert.Equal(t, c.dup, de.Name, c.in)
	}
}

func TestCheck_Invalid(t *testing.T) {
	for _, in := range []string{``, ` `, `{`, `}`, `[1,]`, `{"a":1,}`, `{"a"}`, `{"a" 1}`, `{,}`, `[,1]`, `{1:2}`,
		`01`, `-`, `1.`, `.5`, `1e`, `+1`, `tru`, `nul`, `truex`, `"a`, "\"\x01\"", `"\x"`, `"\u12"`, `"\ud800"`,
		`"\udc00"`, `"\ud800\u0041"`, "\"\xff\"", "\"\xed\xa0\x80\"", `1 2`, `{}{}`, `[1]]`, `["a":1]`, `{"a":1]`,
		"\ufeff{}", `NaN`, `Infinity`, `'a'`} {
		validDup, valid, _ := jsontextVerdict([]byte(in))
		require.False(t, validDup || valid, "jsontext refuses %q", in)
		assert.Error(t, Check([]byte(in)), "%q", in)
	}
}

// Objects of more than 16 names are sorted: a duplicate is found wherever
// it is, whatever its spelling.
func TestCheck_WideObjects(t *testing.T) {
	for _, n := range []int{17, 100, 5000} {
		var b strings.Builder
		b.WriteString("{")
		for i := range n {
			fmt.Fprintf(&b, `"k%d":%d,`, i, i)
		}
		ok := b.String()[:b.Len()-1] + "}"
		require.NoError(t, Check([]byte(ok)), n)
		for _, dup := range []string{`"k0"`, fmt.Sprintf(`"k%d"`, n-1), fmt.Sprintf(`"\u006b%d"`, n/2)} {
			in := ok[:len(ok)-1] + "," + dup + ":0}"
			err := Check([]byte(in))
			var de *DuplicateError
			require.True(t, errors.As(err, &de), "%d %s", n, dup)
		}
	}
}

// allocated returns the octets fn allocates per call, the least of three
// rounds of runs calls, so that the runtime's own allocations do not count.
func allocated(runs int, fn func()) float64 {
	least := -1.0
	fn()
	for range 3 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for range runs {
			fn()
		}
		runtime.ReadMemStats(&after)
		if got := float64(after.TotalAlloc-before.TotalAlloc) / float64(runs); least < 0 || got < least {
			least = got
		}
	}
	return least
}

// What checking costs: nothing for a text whose open objects hold at most
// 256 names at once, and less than the text's size beyond, whatever its
// shape; an error deep inside costs nothing more.
func TestCheck_Allocations(t *testing.T) {
	deep := strings.Repeat(`{"a":[`, MaxDepth/2) + strings.Repeat(`]}`, MaxDepth/2)
	var wide strings.Builder
	wide.WriteString("{")
	for i := range 20000 {
		fmt.Fprintf(&wide, `"%x":0,`, i)
	}
	w := wide.String()[:wide.Len()-1] + "}"
	for _, c := range []struct {
		name string
		in   string
		max  float64 // octets allocated
	}{
		{"small", `{"alg":"ES256","kid":"k","typ":"agent-handoff+jwt"}`, 0},
		{"deep arrays", strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth), 0},
		{"too deep", strings.Repeat("[", MaxDepth+1), 0},
		{"deep objects", deep, float64(len(deep))},
		{"wide", w, float64(len(w))},
	} {
		in := []byte(c.in)
		got := allocated(5, func() { _ = Check(in) })
		assert.LessOrEqual(t, got, c.max, c.name)
	}
	// An error at the bottom of 9999 levels costs what one at the top
	// costs, a message with its offset, not a path: a few hundred octets.
	for _, in := range []string{"x", strings.Repeat("[", MaxDepth-1) + "x", strings.Repeat(`{"a":`, 200) + "x"} {
		b := []byte(in)
		assert.LessOrEqual(t, allocated(5, func() { _ = Check(b) }), 512.0, "an error after %d octets", len(in))
	}
}

func TestCheck_TooDeep(t *testing.T) {
	in := strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1)
	assert.ErrorIs(t, Check([]byte(in)), ErrTooDeep)
	_, _, tooDeep := jsontextVerdict([]byte(in))
	assert.True(t, tooDeep, "jsontext has the same bound")
	in = strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth)
	assert.NoError(t, Check([]byte(in)))
}

// FuzzCheck holds Check to jsontext: it accepts exactly what jsontext
// reads as one JSON text with duplicate names refused; a text jsontext
// reads only with duplicates allowed is a *DuplicateError, and one too
// deep for jsontext is ErrTooDeep.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{`{"a":1,"a":2}`, `{"a":{"b":[{"c":1,"\u0063":2}]}}`, `{"\ud83d\ude00":1,"😀":2}`,
		`[{"x":"}","y":"{"}]`, `{"a\\":1,"a\\\\":2}`, `{"":1,"\u0000":2,"\"":3}`, `[-0.0e+1,1E5,true,null]`,
		"\"\xed\xa0\x80\"", `"\ud800\udc00"`, ` [ ] `} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		validDup, valid, tooDeep := jsontextVerdict(b)
		err := Check(b)
		switch {
		case valid:
			require.NoError(t, err)
			checkWalk(t, b)
		case validDup:
			var de *DuplicateError
			require.True(t, errors.As(err, &de), "jsontext refuses a duplicate name; Check says %v", err)
		case tooDeep:
			require.ErrorIs(t, err, ErrTooDeep)
		default:
			require.Error(t, err, "jsontext refuses %q", b)
		}
	})
}

// checkWalk holds Walk's calls on a valid text to what jsontext reads: the
// top-level object's members, names and values as written, and the
// elements of those that are arrays.
func checkWalk(t *testing.T, b []byte) {
	type call struct{ name, value string }
	var members, elems []call
	err := Walk(b, Fields{
		Member: func(name, value []byte) error {
			members = append(members, call{string(name), string(value)})
			return nil
		},
		Element: func(name, value []byte) error { elems = append(elems, call{string(name), string(value)}); return nil },
	})
	require.NoError(t, err)
	var wantMembers, wantElems []call
	d := jsontext.NewDecoder(bytes.NewReader(b))
	if d.PeekKind() == '{' {
		_, err := d.ReadToken()
		require.NoError(t, err)
		for d.PeekKind() != '}' {
			raw, err := d.ReadValue()
			require.NoError(t, err)
			name := string(raw) // valid until the next read
			value, err := d.ReadValue()
			require.NoError(t, err)
			wantMembers = append(wantMembers, call{name, string(value)})
			if value[0] != '[' {
				continue
			}
			e := jsontext.NewDecoder(bytes.NewReader(value))
			_, err = e.ReadToken()
			require.NoError(t, err)
			for e.PeekKind() != ']' {
				v, err := e.ReadValue()
				require.NoError(t, err)
				wantElems = append(wantElems, call{name, string(v)})
			}
		}
	}
	require.Equal(t, wantMembers, members)
	require.Equal(t, wantElems, elems)
}

// Walk calls Member and Element as FuzzCheck holds them to, and ends with
// the error a function returns.
func TestWalk(t *testing.T) {
	checkWalk(t, []byte(` {"offer" : "a.b.c", "chain": [ "x", 1, {"a":[2]}, [] ], "x":{"chain":[3]}, "\u0063hai":[4]} `))
	checkWalk(t, []byte(`[{"a":[1]}]`))
	stop := errors.New("stop")
	err := Walk([]byte(`{"a":1,"b":2}`), Fields{Member: func(name, _ []byte) error {
		if string(name) == `"b"` {
			return stop
		}
		return nil
	}})
	assert.ErrorIs(t, err, stop)
}

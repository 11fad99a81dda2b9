package jsonnames

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

// jsontextVerdict reads b with jsontext twice: with duplicate names allowed
// (is it valid JSON?) and refused (does it repeat a name?).
func jsontextVerdict(b []byte) (valid, unique bool) {
	read := func(opts ...jsontext.Options) bool {
		d := jsontext.NewDecoder(bytes.NewReader(b), opts...)
		if _, err := d.ReadValue(); err != nil {
			return false
		}
		_, err := d.ReadToken()
		return err == io.EOF // nothing follows
	}
	return read(jsontext.AllowDuplicateNames(true)), read()
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
		{`[1,"a",{"a":[]}]`, ""},
	} {
		valid, unique := jsontextVerdict([]byte(c.in))
		require.True(t, valid, c.in)
		err := Check([]byte(c.in))
		assert.Equal(t, unique, err == nil, "jsontext and Check agree on %s", c.in)
		if c.dup == "" {
			assert.NoError(t, err, c.in)
			continue
		}
		var de *DuplicateError
		require.True(t, errors.As(err, &de), "%s: %v", c.in, err)
		assert.Equal(t, c.dup, de.Name, c.in)
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

// What checking costs: nothing for a text whose open objects hold at most
// 256 names at once, and at most the text's size beyond, whatever its
// shape.
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
		{"deep objects", deep, float64(len(deep))},
		{"wide", w, float64(len(w))},
	} {
		in := []byte(c.in)
		got := allocated(5, func() {
			if err := Check(in); err != nil {
				t.Fatal(err)
			}
		})
		assert.LessOrEqual(t, got, c.max, c.name)
	}
}

// allocated returns the octets fn allocates, on average over runs calls.
func allocated(runs int, fn func()) float64 {
	var before, after runtime.MemStats
	fn()
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range runs {
		fn()
	}
	runtime.ReadMemStats(&after)
	return float64(after.TotalAlloc-before.TotalAlloc) / float64(runs)
}

func TestCheck_TooDeep(t *testing.T) {
	in := strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1)
	assert.Error(t, Check([]byte(in)))
	in = strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth)
	assert.NoError(t, Check([]byte(in)))
}

// FuzzCheck holds Check to jsontext: on every text jsontext reads as valid
// JSON with duplicate names allowed, Check finds a duplicate exactly when
// jsontext, refusing duplicates, refuses the text.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{`{"a":1,"a":2}`, `{"a":{"b":[{"c":1,"\u0063":2}]}}`, `{"\ud83d\ude00":1,"😀":2}`,
		`[{"x":"}","y":"{"}]`, `{"a\\":1,"a\\\\":2}`, `{"":1,"\u0000":2,"\"":3}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		valid, unique := jsontextVerdict(b)
		if !valid {
			return
		}
		err := Check(b)
		if unique {
			require.NoError(t, err)
			return
		}
		var de *DuplicateError
		require.True(t, errors.As(err, &de), "jsontext refuses a duplicate name; Check says %v", err)
	})
}

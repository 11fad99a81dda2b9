//go:build goexperiment.jsonv2

package evidence

// This package keeps unknown members with the "embed" struct tag option of
// github.com/go-json-experiment/json. Under GOEXPERIMENT=jsonv2 that module
// becomes an alias of the standard library's experimental encoding/json/v2,
// which spells the option differently ("unknown"), so unknown members would
// be lost or misnamed and digests would change. Rather than change behaviour
// silently, the package does not build under that experiment: the name
// below is deliberately undefined.
const _ = buildEvidenceWithoutGOEXPERIMENTjsonv2

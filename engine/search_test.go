package engine

import (
	"context"
	"strings"
	"testing"

	"github.com/iwf-server/iwf-server/search"
)

// storeTypes is the store's side of attributeResolver in tests.
type storeTypes map[string]search.ValueType

func (s storeTypes) SearchAttributeTypeOf(_ context.Context, key string) (search.ValueType, error) {
	if t, ok := s[key]; ok {
		return t, nil
	}
	return "", ErrNotFound
}

// TestAttributeResolver: system attributes first, then declared types,
// which win over the store's, then the store's; unknown names are reported
// as such.
func TestAttributeResolver(t *testing.T) {
	r := attributeResolver{
		declared: map[string]search.ValueType{"CustomIntField": search.Double, "OnlyDeclared": search.Bool},
		store:    storeTypes{"CustomIntField": search.Int, "CustomKeywordField": search.Keyword},
	}
	cases := map[string]search.Field{
		"IwfWorkflowType":          {Builtin: search.BuiltinWorkflowType, Type: search.Keyword},
		"IwfExecutingStateIds":     {Key: "IwfExecutingStateIds", Type: search.KeywordArray},
		"IwfGlobalWorkflowVersion": {Key: "IwfGlobalWorkflowVersion", Type: search.Int},
		"CustomIntField":           {Key: "CustomIntField", Type: search.Double},
		"OnlyDeclared":             {Key: "OnlyDeclared", Type: search.Bool},
		"CustomKeywordField":       {Key: "CustomKeywordField", Type: search.Keyword},
	}
	for name, want := range cases {
		if got, err := r.Resolve(context.Background(), name); err != nil || got != want {
			t.Errorf("%s: %+v, %v; want %+v", name, got, err, want)
		}
	}
	if _, err := r.Resolve(context.Background(), "Nope"); err != search.ErrUnknownAttribute {
		t.Errorf("unknown name: %v", err)
	}
}

func TestSearchToken(t *testing.T) {
	const q = "CustomIntField > 1"
	if got := encodeSearchToken("", q); got != "" {
		t.Fatalf("no cursor: token %q, want empty", got)
	}
	tok := encodeSearchToken(`{"k":["1"],"r":"x"}`, q)
	if tok == "" || strings.ContainsAny(tok, "+/=") {
		t.Fatalf("token %q is not URL-safe base64", tok)
	}
	c, err := decodeSearchToken(tok, q)
	if err != nil || c != `{"k":["1"],"r":"x"}` {
		t.Fatalf("round trip: %q, %v", c, err)
	}
	if c, err := decodeSearchToken("", q); err != nil || c != "" {
		t.Fatalf("empty token: %q, %v", c, err)
	}
	for _, bad := range []string{"!!!", "bm90IGpzb24", encodeSearchToken("c", q+" ")} {
		if _, err := decodeSearchToken(bad, q); CodeOf(err) != CodeInvalidArgument {
			t.Errorf("token %q: %v, want invalid_argument", bad, err)
		}
	}
}

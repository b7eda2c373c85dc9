package iwf

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/iwf-server/iwf-server/sdk-go/internal/wire"
)

// EncodedObject is a value as it travels on the wire: the name of its
// encoding and the encoded data. The server stores it without looking
// inside.
type EncodedObject struct {
	Encoding string // e.g. "json"
	Data     string // the encoded value
}

// ObjectEncoder turns Go values into EncodedObjects and back. The SDK uses
// one for every payload it sends or receives: state inputs, data
// attributes, state locals, channel messages, RPC inputs and outputs and
// workflow results. An ObjectEncoder must be safe for concurrent use.
type ObjectEncoder interface {
	// Encode encodes a non-nil value.
	Encode(value any) (EncodedObject, error)
	// Decode decodes o into the value valuePtr points to.
	Decode(o EncodedObject, valuePtr any) error
}

// JSONEncoding is the encoding name written by JSONObjectEncoder.
const JSONEncoding = "json"

// JSONObjectEncoder returns the default ObjectEncoder. It encodes with
// encoding/json under the encoding name "json", and decodes any object whose
// encoding is empty or mentions "json" (case-insensitively), so it also
// reads what the other iWF SDKs write. Empty data decodes as nothing (the
// target is left unchanged).
func JSONObjectEncoder() ObjectEncoder { return jsonObjectEncoder{} }

type jsonObjectEncoder struct{}

func (jsonObjectEncoder) Encode(value any) (EncodedObject, error) {
	data, err := json.Marshal(value)
	if err != nil {
		return EncodedObject{}, err
	}
	return EncodedObject{Encoding: JSONEncoding, Data: string(data)}, nil
}

func (jsonObjectEncoder) Decode(o EncodedObject, valuePtr any) error {
	if o.Encoding != "" && !strings.Contains(strings.ToLower(o.Encoding), "json") {
		return fmt.Errorf("iwf: cannot decode encoding %q as JSON", o.Encoding)
	}
	if o.Data == "" {
		return nil
	}
	return json.Unmarshal([]byte(o.Data), valuePtr)
}

// Object is a payload received from the server: a state input, a data
// attribute, a state local, a channel message, an RPC input or output, or a
// workflow result. It may be null (the sender gave no value). Read it with
// Get or with the generic As.
type Object struct {
	encoded *EncodedObject
	encoder ObjectEncoder
}

// IsNull reports whether the object carries no value.
func (o Object) IsNull() bool { return o.encoded == nil }

// Get decodes the object into the value valuePtr points to. A null object
// leaves that value unchanged and returns nil, so a caller can preset a
// default.
func (o Object) Get(valuePtr any) error {
	if o.encoded == nil {
		return nil
	}
	enc := o.encoder
	if enc == nil {
		enc = JSONObjectEncoder()
	}
	if err := enc.Decode(*o.encoded, valuePtr); err != nil {
		return fmt.Errorf("iwf: decoding object: %w", err)
	}
	return nil
}

// Encoded returns the object as it was received, and false if it is null.
func (o Object) Encoded() (EncodedObject, bool) {
	if o.encoded == nil {
		return EncodedObject{}, false
	}
	return *o.encoded, true
}

// As decodes an Object into a new value of type T. A null object gives T's
// zero value.
//
//	order, err := iwf.As[Order](input)
func As[T any](o Object) (T, error) {
	var v T
	err := o.Get(&v)
	return v, err
}

// newObject wraps a wire payload (nil for none).
func newObject(w *wire.EncodedObject, enc ObjectEncoder) Object {
	if w == nil {
		return Object{encoder: enc}
	}
	return Object{encoded: &EncodedObject{Encoding: deref(w.Encoding), Data: deref(w.Data)}, encoder: enc}
}

// encodeValue encodes a value for the wire. A nil value gives nil (no
// payload); an Object is passed through as it was received.
func encodeValue(enc ObjectEncoder, value any) (*wire.EncodedObject, error) {
	switch v := value.(type) {
	case nil:
		return nil, nil
	case Object:
		if v.encoded == nil {
			return nil, nil
		}
		return &wire.EncodedObject{Encoding: ptr(v.encoded.Encoding), Data: ptr(v.encoded.Data)}, nil
	case *Object:
		if v == nil {
			return nil, nil
		}
		return encodeValue(enc, *v)
	}
	if enc == nil {
		enc = JSONObjectEncoder()
	}
	o, err := enc.Encode(value)
	if err != nil {
		return nil, fmt.Errorf("iwf: encoding %T: %w", value, err)
	}
	return &wire.EncodedObject{Encoding: ptr(o.Encoding), Data: ptr(o.Data)}, nil
}

func ptr[T any](v T) *T { return &v }

func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}

// slice returns the slice a wire field points to (nil for none).
func slice[T any](p *[]T) []T {
	if p == nil {
		return nil
	}
	return *p
}

// nonEmpty returns a pointer to s, or nil when s is empty, so that empty
// lists are omitted from the wire.
func nonEmpty[T any](s []T) *[]T {
	if len(s) == 0 {
		return nil
	}
	return &s
}

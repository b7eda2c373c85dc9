package iwf

import (
	"errors"
	"fmt"
	"time"

	"github.com/iwf-server/iwf-server/sdk-go/internal/wire"
)

// Persistence is a workflow's durable state as seen by one state API or
// RPC call: its data attributes, its search attributes, the state locals of
// the current state execution and debugging events.
//
// Reads see what the server loaded for this call (per the loading
// policies) plus this call's own writes. Writes are sent back with the
// call's answer and applied atomically with it; they never fail at the call
// site. A write the SDK cannot send (an undeclared key, a value the
// ObjectEncoder rejects, a search attribute of the wrong type) fails the
// whole call once the state method returns, as if it had returned the
// error.
type Persistence interface {
	// GetDataAttribute decodes the data attribute key into the value
	// valuePtr points to. A missing key leaves that value unchanged.
	GetDataAttribute(key string, valuePtr any) error
	// SetDataAttribute writes the data attribute key.
	SetDataAttribute(key string, value any)

	// The search attribute getters return the zero value when the key is
	// missing or holds another type; the setters write a value of that
	// type (the key must be declared with that type).
	GetSearchAttributeKeyword(key string) string
	SetSearchAttributeKeyword(key string, value string)
	GetSearchAttributeText(key string) string
	SetSearchAttributeText(key string, value string)
	GetSearchAttributeInt(key string) int64
	SetSearchAttributeInt(key string, value int64)
	GetSearchAttributeDouble(key string) float64
	SetSearchAttributeDouble(key string, value float64)
	GetSearchAttributeBool(key string) bool
	SetSearchAttributeBool(key string, value bool)
	GetSearchAttributeDatetime(key string) time.Time
	SetSearchAttributeDatetime(key string, value time.Time)
	GetSearchAttributeKeywordArray(key string) []string
	SetSearchAttributeKeywordArray(key string, value []string)

	// GetStateLocal decodes the state local key into the value valuePtr
	// points to; a missing key leaves it unchanged. State locals belong to
	// one state execution: set them in WaitUntil, read them in Execute.
	GetStateLocal(key string, valuePtr any) error
	// SetStateLocal writes a state local. Only WaitUntil's writes reach
	// Execute; the server ignores those of Execute and RPCs.
	SetStateLocal(key string, value any)

	// RecordEvent records a debugging event in the workflow's history.
	RecordEvent(key string, value any)
}

// Communication is how a state API or RPC call talks to the rest of the
// workflow. Like Persistence writes, its effects are sent with the call's
// answer and its mistakes fail the call when the method returns.
type Communication interface {
	// PublishToInternalChannel appends a message (value may be nil) to a
	// declared internal channel.
	PublishToInternalChannel(channel string, value any)
	// TriggerStateMovements moves the workflow to new states, in addition
	// to whatever runs. Only RPCs may call it; states return a
	// StateDecision instead.
	TriggerStateMovements(movements ...StateMovement)
	// SignalChannelSize and InternalChannelSize return the number of
	// messages waiting on a channel. The server reports them only to RPCs;
	// in state APIs they return 0.
	SignalChannelSize(channel string) int
	InternalChannelSize(channel string) int
}

// call collects everything one state API or RPC call reads and writes.
// It implements Persistence and Communication.
type call struct {
	wf    *compiledWorkflow
	enc   ObjectEncoder
	isRPC bool
	err   error // first write error

	das      *orderedMap[*wire.EncodedObject]
	sas      *orderedMap[wire.SearchAttribute]
	locals   *orderedMap[*wire.EncodedObject]
	events   []wire.KeyValue
	messages []wire.InterStateChannelPublishing
	moves    []StateMovement

	signalSizes, internalSizes map[string]int
}

func newCall(wf *compiledWorkflow, enc ObjectEncoder, das []wire.KeyValue, sas []wire.SearchAttribute, locals []wire.KeyValue) *call {
	c := &call{wf: wf, enc: enc, das: newOrderedMap[*wire.EncodedObject](), sas: newOrderedMap[wire.SearchAttribute](), locals: newOrderedMap[*wire.EncodedObject]()}
	for _, kv := range das {
		c.das.load(deref(kv.Key), kv.Value)
	}
	for _, sa := range sas {
		c.sas.load(deref(sa.Key), sa)
	}
	for _, kv := range locals {
		c.locals.load(deref(kv.Key), kv.Value)
	}
	return c
}

func (c *call) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}

func (c *call) GetDataAttribute(key string, valuePtr any) error {
	v, ok := c.das.get(key)
	if !ok {
		return nil
	}
	if err := newObject(v, c.enc).Get(valuePtr); err != nil {
		return fmt.Errorf("iwf: data attribute %q: %w", key, err)
	}
	return nil
}

func (c *call) SetDataAttribute(key string, value any) {
	if !c.wf.dataAttributes.has(key) {
		c.fail(fmt.Errorf("iwf: data attribute %q is not declared in DataAttributes of workflow %q", key, c.wf.typ))
		return
	}
	v, err := encodeValue(c.enc, value)
	if err != nil {
		c.fail(fmt.Errorf("iwf: data attribute %q: %w", key, err))
		return
	}
	c.das.set(key, v)
}

func (c *call) GetStateLocal(key string, valuePtr any) error {
	v, ok := c.locals.get(key)
	if !ok {
		return nil
	}
	if err := newObject(v, c.enc).Get(valuePtr); err != nil {
		return fmt.Errorf("iwf: state local %q: %w", key, err)
	}
	return nil
}

func (c *call) SetStateLocal(key string, value any) {
	v, err := encodeValue(c.enc, value)
	if err != nil {
		c.fail(fmt.Errorf("iwf: state local %q: %w", key, err))
		return
	}
	c.locals.set(key, v)
}

func (c *call) RecordEvent(key string, value any) {
	v, err := encodeValue(c.enc, value)
	if err != nil {
		c.fail(fmt.Errorf("iwf: event %q: %w", key, err))
		return
	}
	c.events = append(c.events, wire.KeyValue{Key: ptr(key), Value: v})
}

// getSA returns the loaded or written search attribute key if it has type t.
func (c *call) getSA(key string, t SearchAttributeType) (SearchAttribute, bool) {
	w, ok := c.sas.get(key)
	if !ok || SearchAttributeType(deref(w.ValueType)) != t {
		return SearchAttribute{}, false
	}
	return searchAttributeFromWire(w), true
}

func (c *call) setSA(a SearchAttribute) {
	declared, ok := c.wf.searchAttributes[a.Key]
	switch {
	case !ok:
		c.fail(fmt.Errorf("iwf: search attribute %q is not declared in SearchAttributes of workflow %q", a.Key, c.wf.typ))
		return
	case declared != a.Type:
		c.fail(fmt.Errorf("iwf: search attribute %q is declared %s, not %s", a.Key, declared, a.Type))
		return
	}
	w, err := a.toWire()
	if err != nil {
		c.fail(err)
		return
	}
	c.sas.set(a.Key, w)
}

func (c *call) GetSearchAttributeKeyword(key string) string {
	a, _ := c.getSA(key, SearchAttributeKeyword)
	return a.StringValue
}

func (c *call) SetSearchAttributeKeyword(key string, value string) {
	c.setSA(KeywordAttribute(key, value))
}

func (c *call) GetSearchAttributeText(key string) string {
	a, _ := c.getSA(key, SearchAttributeText)
	return a.StringValue
}

func (c *call) SetSearchAttributeText(key string, value string) { c.setSA(TextAttribute(key, value)) }

func (c *call) GetSearchAttributeInt(key string) int64 {
	a, _ := c.getSA(key, SearchAttributeInt)
	return a.IntValue
}

func (c *call) SetSearchAttributeInt(key string, value int64) { c.setSA(IntAttribute(key, value)) }

func (c *call) GetSearchAttributeDouble(key string) float64 {
	a, _ := c.getSA(key, SearchAttributeDouble)
	return a.DoubleValue
}

func (c *call) SetSearchAttributeDouble(key string, value float64) {
	c.setSA(DoubleAttribute(key, value))
}

func (c *call) GetSearchAttributeBool(key string) bool {
	a, _ := c.getSA(key, SearchAttributeBool)
	return a.BoolValue
}

func (c *call) SetSearchAttributeBool(key string, value bool) { c.setSA(BoolAttribute(key, value)) }

func (c *call) GetSearchAttributeDatetime(key string) time.Time {
	a, _ := c.getSA(key, SearchAttributeDatetime)
	return a.TimeValue
}

func (c *call) SetSearchAttributeDatetime(key string, value time.Time) {
	c.setSA(DatetimeAttribute(key, value))
}

func (c *call) GetSearchAttributeKeywordArray(key string) []string {
	a, _ := c.getSA(key, SearchAttributeKeywordArray)
	return a.StringsValue
}

func (c *call) SetSearchAttributeKeywordArray(key string, value []string) {
	c.setSA(KeywordArrayAttribute(key, value...))
}

func (c *call) PublishToInternalChannel(channel string, value any) {
	if !c.wf.internalChannels.has(channel) {
		c.fail(fmt.Errorf("iwf: internal channel %q is not declared in InternalChannels of workflow %q", channel, c.wf.typ))
		return
	}
	v, err := encodeValue(c.enc, value)
	if err != nil {
		c.fail(fmt.Errorf("iwf: message for internal channel %q: %w", channel, err))
		return
	}
	c.messages = append(c.messages, wire.InterStateChannelPublishing{ChannelName: channel, Value: v})
}

func (c *call) TriggerStateMovements(movements ...StateMovement) {
	if !c.isRPC {
		c.fail(errors.New("iwf: TriggerStateMovements is only for RPCs; a state returns a StateDecision"))
		return
	}
	c.moves = append(c.moves, movements...)
}

func (c *call) SignalChannelSize(channel string) int   { return c.signalSizes[channel] }
func (c *call) InternalChannelSize(channel string) int { return c.internalSizes[channel] }

// The answer fields, in write order (nil when empty).

func (c *call) upsertDataAttributes() *[]wire.KeyValue { return writtenObjects(c.das) }
func (c *call) upsertStateLocals() *[]wire.KeyValue    { return writtenObjects(c.locals) }

func (c *call) upsertSearchAttributes() *[]wire.SearchAttribute {
	var out []wire.SearchAttribute
	for _, k := range c.sas.order {
		out = append(out, c.sas.values[k])
	}
	return nonEmpty(out)
}

// orderedMap is loaded values plus writes, which it remembers in the order
// of their first write.
type orderedMap[V any] struct {
	values map[string]V
	order  []string // written keys
	dirty  map[string]bool
}

func newOrderedMap[V any]() *orderedMap[V] {
	return &orderedMap[V]{values: map[string]V{}, dirty: map[string]bool{}}
}

func (m *orderedMap[V]) load(k string, v V) { m.values[k] = v }

func (m *orderedMap[V]) get(k string) (V, bool) {
	v, ok := m.values[k]
	return v, ok
}

func (m *orderedMap[V]) set(k string, v V) {
	m.values[k] = v
	if !m.dirty[k] {
		m.dirty[k] = true
		m.order = append(m.order, k)
	}
}

// writtenObjects returns the writes of an object map as wire key-values.
func writtenObjects(m *orderedMap[*wire.EncodedObject]) *[]wire.KeyValue {
	var out []wire.KeyValue
	for _, k := range m.order {
		out = append(out, wire.KeyValue{Key: ptr(k), Value: m.values[k]})
	}
	return nonEmpty(out)
}

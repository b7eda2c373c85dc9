package engine

// External storage of big payloads (iWF's "external storage"): with
// Config.Payloads set, every encoded object whose data is longer than
// Config.PayloadThreshold is written to that blob store before the
// transaction that stores it, and the rows keep only the reference
// {encoding, extStoreId, extPath}. Workers and API readers see the data
// inline: references are loaded before every worker call and in every
// answer that shows payloads.
//
// Offloading happens once per request, on the value that arrives (a
// decoded API request, a worker's answer, an external input), before the
// conversion to records: every copy the engine then keeps of that value
// (attribute rows, messages, the run's and the execution's records,
// history) holds the same reference. An encoded object that arrives as a
// reference, from a client or a worker, is loaded and handled as if its
// data had been sent: what a run refers to is always an object written
// for it.
//
// A big API request body is never held whole: the HTTP layer streams the
// big data strings of its encoded objects to the store as the body
// arrives (SpillPayload), and hands the engine the body with references
// in their place, and the set of those references in the request's
// context (WithSpilledPayloads). Those references name objects
// written for this request: offload keeps them as they are, neither
// loaded nor written again, and the transaction that stores them gives
// them to its run, as it does the objects offload writes. A reference the
// context does not name is one the client sent, handled as above: a client
// cannot pass off another object as one written for its request. The
// workflow id is not known while a body streams: the path of such an
// object begins with the fixed segment "_request" (spillSegment) instead
// of the workflow's.
//
// The objects a run refers to are recorded in the store (PayloadRef
// rows), so that they can be deleted with the run and never before:
//
//   - before an object is written (by offload or SpillPayload), a row
//     records it as pending, in a transaction of its own (PayloadAdd);
//   - the transaction that stores the reference gives the pending row to
//     its run (PayloadKeep), and fails should the row no longer be
//     pending;
//   - a run that starts from another one's records (a workflow retry, a
//     cron run, a reset) gets rows of its own for the objects it shares
//     (PayloadLink, PayloadCopy);
//   - deleting a run (retention) marks its rows unreferenced, in the
//     deleting transaction (a trigger of the store's schema);
//   - the payload sweep (SweepPayloads) marks pending rows older than
//     Config.PayloadGrace unreferenced (their transaction never
//     committed), deletes every object whose rows are all unreferenced,
//     and then those rows.
//
// An object is thus deleted after the last run that refers to it is, and
// only then.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine/internal/record"
)

// The defaults of the external storage settings.
const (
	// DefaultPayloadThreshold is the size (bytes of data) above which a
	// payload goes to the external store.
	DefaultPayloadThreshold = 64 << 10
	// DefaultPayloadGrace is how long an object written for a transaction
	// may stay unclaimed before the payload sweep deletes it.
	DefaultPayloadGrace = time.Hour
	// payloadSweepBatch bounds the objects one step of a payload sweep
	// takes.
	payloadSweepBatch = 200
	// spillSegment is the first segment of the path of an object streamed
	// from a request body (SpillPayload), whose workflow is not known yet.
	spillSegment = "_request"
)

// PayloadStore keeps the payloads too big for a row: iWF's external
// storage. internal/extstore implements it on gocloud.dev/blob buckets.
type PayloadStore interface {
	// ActiveID is the id (extStoreId) of the store new objects are written
	// to; "" when the stores are only read (nothing is offloaded).
	ActiveID() string
	// StoreIDs are the ids of every store it reads, the active one
	// included.
	StoreIDs() []string
	// Put writes data as the object at path of the active store.
	Put(ctx context.Context, path, data string) error
	// PutStream writes what r reads, to its end, as the object at path of
	// the active store, without holding it whole. The object appears
	// whole or not at all: a write whose reader fails is abandoned, and
	// the reader's error returned.
	PutStream(ctx context.Context, path string, r io.Reader) error
	// Get reads the object at path of the store storeID. The error wraps
	// ErrPayloadStoreUnknown when no store has that id, ErrPayloadMissing
	// when the store has no object at path.
	Get(ctx context.Context, storeID, path string) (string, error)
	// Delete removes the object at path of the store storeID; an object
	// that is not there is no error. The error wraps
	// ErrPayloadStoreUnknown when no store has that id.
	Delete(ctx context.Context, storeID, path string) error
}

// The errors of a PayloadStore.
var (
	ErrPayloadStoreUnknown = errors.New("no external store has this id")
	ErrPayloadMissing      = errors.New("no object at this path of the external store")
)

// ErrPayloadGone is returned by a transaction that would have kept
// objects the payload sweep had already given up (PayloadKeep): they were
// written longer than Config.PayloadGrace ago. Nothing of it is kept.
var ErrPayloadGone = errors.New("external objects written for this transaction were swept before it committed")

// PayloadRef names one object of an external store.
type PayloadRef struct {
	StoreID string
	Path    string
}

// payloadReadTx is the read side of the external object records (part of
// ReadTx).
type payloadReadTx interface {
	// PayloadOrphans returns up to limit objects, of the stores storeIDs,
	// whose records are all unreferenced: no run refers to them and no
	// transaction is about to. Their objects may be deleted.
	PayloadOrphans(ctx context.Context, storeIDs []string, limit int) ([]PayloadRef, error)
	// PayloadList returns the objects run runID keeps, by path.
	PayloadList(ctx context.Context, runID string) ([]PayloadRef, error)
}

// payloadTx is the write side of the external object records (part of
// Tx). A record is pending (written for a transaction not yet
// committed), kept by a run, or unreferenced.
type payloadTx interface {
	// PayloadAdd records objects about to be written, pending, at now.
	PayloadAdd(ctx context.Context, refs []PayloadRef, now time.Time) error
	// PayloadKeep gives the pending objects at paths to run runID. The
	// transaction fails with ErrPayloadGone, at once or at its commit,
	// unless every one of them was pending.
	PayloadKeep(ctx context.Context, runID string, paths []string) error
	// PayloadLink gives run runID, kept from now, the objects at paths
	// that some run keeps; the others are left out.
	PayloadLink(ctx context.Context, runID string, paths []string, now time.Time) error
	// PayloadCopy gives run toRunID, kept from now, every object run
	// fromRunID keeps.
	PayloadCopy(ctx context.Context, fromRunID, toRunID string, now time.Time) error
	// PayloadExpire marks unreferenced up to limit pending records made
	// before before, and returns how many it marked.
	PayloadExpire(ctx context.Context, before time.Time, limit int) (int, error)
	// PayloadForget removes the unreferenced records of the objects at
	// paths (their objects are deleted).
	PayloadForget(ctx context.Context, paths []string) error
}

// payloadMetrics count the external store's operations.
type payloadMetrics struct {
	errors  counterVec // failed operations, by op
	written counterVec // objects written
	read    counterVec // objects read
	deleted counterVec // objects deleted by the payload sweep
}

func newPayloadMetrics() *payloadMetrics {
	return &payloadMetrics{
		errors: newCounterVec("iwf_external_storage_errors_total",
			"Operations on the external payload store (--external-storage-url) that failed, by op (put, get, delete).", "op"),
		written: newCounterVec("iwf_external_storage_objects_written_total", "Payloads written to the external store."),
		read:    newCounterVec("iwf_external_storage_objects_read_total", "Payloads read from the external store."),
		deleted: newCounterVec("iwf_external_storage_objects_deleted_total", "Objects of the external store deleted by the payload sweep: their runs were deleted, or their transaction never committed."),
	}
}

func (m *payloadMetrics) write(b *strings.Builder) {
	m.errors.write(b)
	m.written.write(b)
	m.read.write(b)
	m.deleted.write(b)
}

// payloadsOn reports whether the engine reads external objects.
func (e *Engine) payloadsOn() bool { return e.cfg.Payloads != nil }

// offloading reports whether the engine writes external objects.
func (e *Engine) offloading() bool { return e.cfg.Payloads != nil && e.cfg.Payloads.ActiveID() != "" }

// ---- finding the encoded objects of a value ----

// objectFields are the fields of one encoded object (an
// iwfapi.EncodedObject or a record.Value) found in a value. Callers set
// the pointers, never what they point to: the strings are shared with
// the records the value was built from.
type objectFields struct {
	encoding, data, extPath, extStoreID **string
}

var (
	wireObjectType   = reflect.TypeFor[iwfapi.EncodedObject]()
	recordObjectType = reflect.TypeFor[record.Value]()
)

// eachObject calls fn with every encoded object of the values (pointers,
// slices or maps of wire or record types), in field order. Map entries
// are copied, changed and stored back.
func eachObject(fn func(objectFields) error, values ...any) error {
	for _, v := range values {
		if v == nil {
			continue
		}
		if err := walkObjects(reflect.ValueOf(v), fn); err != nil {
			return err
		}
	}
	return nil
}

func walkObjects(v reflect.Value, fn func(objectFields) error) error {
	if !v.IsValid() || !holdsObjects(v.Type()) {
		return nil
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return nil
		}
		return walkObjects(v.Elem(), fn)
	case reflect.Struct:
		if !v.CanAddr() {
			c := reflect.New(v.Type()).Elem()
			c.Set(v)
			v = c // read only: a copy (eachObject is given pointers to change)
		}
		switch v.Type() {
		case wireObjectType:
			o := v.Addr().Interface().(*iwfapi.EncodedObject)
			return fn(objectFields{&o.Encoding, &o.Data, &o.ExtPath, &o.ExtStoreId})
		case recordObjectType:
			o := v.Addr().Interface().(*record.Value)
			return fn(objectFields{&o.Encoding, &o.Data, &o.ExtPath, &o.ExtStoreID})
		}
		t := v.Type()
		for i := range t.NumField() {
			if !t.Field(i).IsExported() {
				continue
			}
			if err := walkObjects(v.Field(i), fn); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			if err := walkObjects(v.Index(i), fn); err != nil {
				return err
			}
		}
	case reflect.Map:
		if v.IsNil() {
			return nil
		}
		it := v.MapRange()
		for it.Next() {
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(it.Value())
			if err := walkObjects(e, fn); err != nil {
				return err
			}
			v.SetMapIndex(it.Key(), e)
		}
	}
	return nil
}

// holdsTypes caches holdsObjects.
var holdsTypes sync.Map // reflect.Type -> bool

// holdsObjects reports whether values of type t can hold an encoded
// object.
func holdsObjects(t reflect.Type) bool {
	if v, ok := holdsTypes.Load(t); ok {
		return v.(bool)
	}
	holds, _ := typeHolds(t, map[reflect.Type]bool{})
	return holds
}

// typeHolds is holdsObjects; open are the types being looked at (a type
// that contains itself), whose answer is not known yet. provisional
// reports that the answer rests on one of them and is not cached.
func typeHolds(t reflect.Type, open map[reflect.Type]bool) (holds, provisional bool) {
	if v, ok := holdsTypes.Load(t); ok {
		return v.(bool), false
	}
	if t == wireObjectType || t == recordObjectType {
		holdsTypes.Store(t, true)
		return true, false
	}
	if open[t] {
		return false, true
	}
	open[t] = true
	defer delete(open, t)
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array:
		holds, provisional = typeHolds(t.Elem(), open)
	case reflect.Map:
		holds, provisional = typeHolds(t.Elem(), open)
	case reflect.Struct:
		for i := range t.NumField() {
			if !t.Field(i).IsExported() {
				continue
			}
			h, p := typeHolds(t.Field(i).Type, open)
			provisional = provisional || p
			if h {
				holds, provisional = true, false
				break
			}
		}
	}
	if !provisional {
		holdsTypes.Store(t, holds)
	}
	return holds, provisional
}

// copyValues returns a copy of v that shares no pointer, slice or map
// with it (strings are shared: they never change), so that the encoded
// objects of the copy can be replaced without touching v's.
func copyValues[T any](v T) T {
	var out T
	copyValue(reflect.ValueOf(&out).Elem(), reflect.ValueOf(v))
	return out
}

func copyValue(dst, src reflect.Value) {
	switch src.Kind() {
	case reflect.Pointer:
		if src.IsNil() {
			return
		}
		p := reflect.New(src.Type().Elem())
		copyValue(p.Elem(), src.Elem())
		dst.Set(p)
	case reflect.Struct:
		for i := range src.NumField() {
			if src.Type().Field(i).IsExported() {
				copyValue(dst.Field(i), src.Field(i))
			}
		}
	case reflect.Slice:
		if src.IsNil() {
			return
		}
		s := reflect.MakeSlice(src.Type(), src.Len(), src.Len())
		for i := range src.Len() {
			copyValue(s.Index(i), src.Index(i))
		}
		dst.Set(s)
	case reflect.Map:
		if src.IsNil() {
			return
		}
		m := reflect.MakeMapWithSize(src.Type(), src.Len())
		it := src.MapRange()
		for it.Next() {
			e := reflect.New(src.Type().Elem()).Elem()
			copyValue(e, it.Value())
			m.SetMapIndex(it.Key(), e)
		}
		dst.Set(m)
	default:
		dst.Set(src)
	}
}

// ---- writing ----

// offloaded are the objects one offload wrote, and those SpillPayload
// wrote for the request that it found: the transaction that stores their
// references keeps them for its run (txn.keepPayloads).
type offloaded struct {
	paths []string
}

// storageFailed counts a failed operation on the external store and logs
// it at warn, with the run it was for: at most one line per operation
// every failureLogInterval, which counts the lines left out.
func (e *Engine) storageFailed(op string, err error, workflowID, runID, storeID, path string) {
	e.payloadMetrics.errors.inc(op)
	suppressed, ok := e.failureLogs.allow("external storage: "+op, e.cfg.Clock.Now())
	if !ok {
		return
	}
	ev := e.log.Warn().Err(err).Str("op", op).Str("extStoreId", storeID).Str("extPath", path)
	if workflowID != "" {
		ev = ev.Str("workflowId", workflowID)
	}
	if runID != "" {
		ev = ev.Str("runId", runID)
	}
	if suppressed > 0 {
		ev = ev.Int("suppressed", suppressed)
	}
	ev.Msg("external storage operation failed; the operation is retried (a worker call after a second, an API call by its client, a deletion at the next payload sweep)")
}

// storageError is the error of a failed operation on the external store:
// the API answers 503, a task tries again.
func storageError(op string, err error) error {
	return &UnavailableError{Store: "external storage (" + op + ")", Err: err}
}

// offload prepares values (wire or record types, pointers) to be stored:
// it loads the encoded objects that arrive as references (but those
// streamed from the request's body, WithSpilledPayloads, which stay as
// they are), then writes those whose data is longer than
// Config.PayloadThreshold to the external store and replaces each by its
// reference. workflowID and runID ("" when not known yet) name the run in
// logs and in the objects' paths. Without an external store it changes
// nothing.
func (e *Engine) offload(ctx context.Context, workflowID, runID string, values ...any) (*offloaded, error) {
	if !e.payloadsOn() {
		return nil, nil
	}
	var (
		big     []objectFields
		spilled []string // paths of the objects SpillPayload wrote for the request
	)
	err := eachObject(func(o objectFields) error {
		kept, err := e.resolveSent(ctx, o, workflowID, runID)
		if err != nil {
			return err
		}
		if kept {
			if !slices.Contains(spilled, **o.extPath) {
				spilled = append(spilled, **o.extPath)
			}
			return nil
		}
		if e.offloading() && *o.data != nil && len(**o.data) > e.cfg.PayloadThreshold {
			big = append(big, o)
		}
		return nil
	}, values...)
	if err != nil {
		return nil, err
	}
	if len(big) == 0 {
		if len(spilled) == 0 {
			return nil, nil
		}
		return &offloaded{paths: spilled}, nil
	}
	ps := e.cfg.Payloads
	storeID := ps.ActiveID()
	refs := make([]PayloadRef, len(big))
	prefix := pathSegment(workflowID) + "/"
	for i := range big {
		refs[i] = PayloadRef{StoreID: storeID, Path: prefix + uuid.NewString()}
	}
	// Recorded before they are written: an object whose transaction
	// never commits is found by the payload sweep.
	now := e.cfg.Clock.Now()
	err = e.storeUpdate(ctx, func(ctx context.Context, tx Tx) error {
		return tx.PayloadAdd(ctx, refs, now)
	})
	if err != nil {
		return nil, err
	}
	out := &offloaded{paths: make([]string, len(big))}
	for i, o := range big {
		if err := ps.Put(ctx, refs[i].Path, **o.data); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			e.storageFailed("put", err, workflowID, runID, storeID, refs[i].Path)
			return nil, storageError("put", err)
		}
		e.payloadMetrics.written.inc()
		*o.data, *o.extStoreID, *o.extPath = nil, ptr(storeID), ptr(refs[i].Path)
		out.paths[i] = refs[i].Path
	}
	out.paths = append(out.paths, spilled...)
	return out, nil
}

// resolveSent handles an encoded object as it arrives from a client or a
// worker: a reference without data is loaded, and the reference fields
// are dropped (data sent beside a reference, as an API answer shows it,
// is what counts). A reference to an object SpillPayload wrote for this
// request (WithSpilledPayloads) is the engine's own: it is left as it is,
// and spilled reports it.
func (e *Engine) resolveSent(ctx context.Context, o objectFields, workflowID, runID string) (spilled bool, err error) {
	if *o.extPath == nil && *o.extStoreID == nil {
		return false, nil
	}
	if *o.data == nil {
		if *o.extPath == nil || *o.extStoreID == nil {
			return false, Errorf(CodeInvalidArgument, "an encoded object without data needs both extStoreId and extPath to refer to an external object")
		}
		if isSpilled(ctx, PayloadRef{StoreID: **o.extStoreID, Path: **o.extPath}) {
			return true, nil
		}
		if err := checkObjectPath(**o.extPath); err != nil {
			return false, err
		}
		data, err := e.loadObject(ctx, **o.extStoreID, **o.extPath, workflowID, runID, true)
		if err != nil {
			return false, err
		}
		*o.data = &data
	}
	*o.extPath, *o.extStoreID = nil, nil
	return false, nil
}

// ---- streaming a request body's payloads ----

// SpillThreshold is the length of data (bytes, unescaped) above which
// the engine keeps a payload in the external store
// (Config.PayloadThreshold); 0 when it writes none (no external store, or
// only read ones): then SpillPayload refuses every call.
func (e *Engine) SpillThreshold() int {
	if !e.offloading() {
		return 0
	}
	return e.cfg.PayloadThreshold
}

// SpillPayload writes the data r reads, to its end, as a new object of the
// active external store, streamed: it is not held whole. The HTTP layer
// calls it for each big data string of a request body as the body
// arrives, and passes the references it returns to the request's context
// (WithSpilledPayloads). As with every object the engine writes, a
// pending record of it is stored first, in a transaction of its own: an
// object whose request never stores its reference is deleted by the
// payload sweep once Config.PayloadGrace has passed.
//
// A failure of r (the client's body) is returned as it is; a failure of
// the store is counted and logged, and returned as CodeUnavailable (503).
func (e *Engine) SpillPayload(ctx context.Context, r io.Reader) (PayloadRef, error) {
	if !e.offloading() {
		return PayloadRef{}, Errorf(CodeUnimplemented, "this server writes no payloads to an external store")
	}
	ps := e.cfg.Payloads
	ref := PayloadRef{StoreID: ps.ActiveID(), Path: spillSegment + "/" + uuid.NewString()}
	now := e.cfg.Clock.Now()
	err := e.storeUpdate(ctx, func(ctx context.Context, tx Tx) error {
		return tx.PayloadAdd(ctx, []PayloadRef{ref}, now)
	})
	if err != nil {
		return PayloadRef{}, err
	}
	src := &sourceReader{r: r}
	if err := ps.PutStream(ctx, ref.Path, src); err != nil {
		if src.err != nil {
			return PayloadRef{}, src.err
		}
		if ctx.Err() != nil {
			return PayloadRef{}, ctx.Err()
		}
		e.storageFailed("put", err, "", "", ref.StoreID, ref.Path)
		return PayloadRef{}, storageError("put", err)
	}
	e.payloadMetrics.written.inc()
	return ref, nil
}

// sourceReader remembers the error of the reader it reads, other than
// io.EOF: SpillPayload tells the source's failures from the store's.
type sourceReader struct {
	r   io.Reader
	err error
}

func (s *sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		s.err = err
	}
	return n, err
}

type spilledKey struct{}

// WithSpilledPayloads returns ctx carrying refs: the objects SpillPayload
// wrote for the request ctx serves, which its body refers to in place of
// their data. The engine keeps those references as they are and gives
// their objects to the run that stores them; every other reference in the
// request is handled as one a client sent.
func WithSpilledPayloads(ctx context.Context, refs []PayloadRef) context.Context {
	if len(refs) == 0 {
		return ctx
	}
	set := make(map[PayloadRef]bool, len(refs))
	for _, r := range refs {
		set[r] = true
	}
	return context.WithValue(ctx, spilledKey{}, set)
}

// isSpilled reports whether ref names an object SpillPayload wrote for
// the request ctx serves.
func isSpilled(ctx context.Context, ref PayloadRef) bool {
	set, _ := ctx.Value(spilledKey{}).(map[PayloadRef]bool)
	return set[ref]
}

// pathSegment is the first segment of an object's path: the workflow id
// with every byte but ASCII letters, digits, '-' and '_' replaced by '_',
// at most 64 bytes. It helps people find a workflow's objects; the
// uuid that follows it makes the path unique.
func pathSegment(workflowID string) string {
	var b strings.Builder
	for i := 0; i < len(workflowID) && b.Len() < 64; i++ {
		c := workflowID[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' {
			b.WriteByte(c)
		} else {
			b.WriteByte('_')
		}
	}
	if b.Len() == 0 {
		return "_"
	}
	return b.String()
}

// checkObjectPath refuses a reference, sent by a client or a worker,
// whose path is not of the shape the engine writes (pathSegment, "/", a
// UUID): a reference reads only payload objects, never another object
// that shares the bucket.
func checkObjectPath(path string) error {
	seg, id, ok := strings.Cut(path, "/")
	if ok && seg != "" && seg == pathSegment(seg) && len(id) == 36 {
		if _, err := uuid.Parse(id); err == nil {
			return nil
		}
	}
	return Errorf(CodeInvalidArgument, "extPath %q is not the path of a payload of this server's external storage", truncate(path, 200))
}

// keepPayloads gives the objects o wrote to run runID, in the
// transaction that stores their references.
func (t *txn) keepPayloads(o *offloaded, runID string) error {
	if o == nil || len(o.paths) == 0 {
		return nil
	}
	return t.tx.PayloadKeep(t.ctx, runID, o.paths)
}

// linkStartPayloads gives a run started from the start request of
// another one (a workflow retry, a cron run) the objects that request
// refers to.
func (r *runTxn) linkStartPayloads(runID string, start *record.Start) error {
	var paths []string
	_ = eachObject(func(o objectFields) error {
		if *o.extPath != nil && *o.data == nil {
			paths = append(paths, **o.extPath)
		}
		return nil
	}, start)
	if len(paths) == 0 {
		return nil
	}
	return r.tx.PayloadLink(r.ctx, runID, paths, r.now)
}

// ---- reading ----

// loadObject reads one object. sent says the reference came from a
// client or worker: a reference that names nothing is their mistake
// (400); one the engine stored that names nothing is an internal error.
func (e *Engine) loadObject(ctx context.Context, storeID, path, workflowID, runID string, sent bool) (string, error) {
	data, err := e.cfg.Payloads.Get(ctx, storeID, path)
	if err == nil {
		e.payloadMetrics.read.inc()
		return data, nil
	}
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	switch {
	case errors.Is(err, ErrPayloadStoreUnknown) && sent:
		return "", Errorf(CodeInvalidArgument, "extStoreId %q names no external store of this server", storeID)
	case errors.Is(err, ErrPayloadMissing) && sent:
		return "", Errorf(CodeInvalidArgument, "the external store %q has no object at extPath %q", storeID, path)
	}
	e.storageFailed("get", err, workflowID, runID, storeID, path)
	if errors.Is(err, ErrPayloadStoreUnknown) || errors.Is(err, ErrPayloadMissing) {
		return "", &Error{Code: CodeInternal, Message: fmt.Sprintf("a stored payload refers to the external object %s of store %s, which cannot be read", path, storeID), Err: err}
	}
	return "", storageError("get", err)
}

// inline loads the data of every encoded object of values that refers to
// an external object. With keepRef the reference stays beside the data
// (API answers, as iWF's dataobjects/get shows them); without it the
// object is as the client first sent it (worker requests). Without an
// external store it changes nothing: references pass as they are.
func (e *Engine) inline(ctx context.Context, keepRef bool, workflowID, runID string, values ...any) error {
	if !e.payloadsOn() {
		return nil
	}
	loaded := map[PayloadRef]*string{}
	return eachObject(func(o objectFields) error {
		if *o.data != nil || *o.extPath == nil || *o.extStoreID == nil {
			return nil
		}
		ref := PayloadRef{StoreID: **o.extStoreID, Path: **o.extPath}
		data, ok := loaded[ref]
		if !ok {
			s, err := e.loadObject(ctx, ref.StoreID, ref.Path, workflowID, runID, false)
			if err != nil {
				return err
			}
			data = &s
			loaded[ref] = data
		}
		*o.data = data
		if !keepRef {
			*o.extPath, *o.extStoreID = nil, nil
		}
		return nil
	}, values...)
}

// inlineJSON is inline for engine records read as generic JSON (a
// history event's data, an execution's record): every object with
// "extStoreId" and "extPath" strings and no "data" gets its data.
func (e *Engine) inlineJSON(ctx context.Context, keepRef bool, workflowID, runID string, v any) error {
	switch x := v.(type) {
	case map[string]any:
		store, sok := x["extStoreId"].(string)
		path, pok := x["extPath"].(string)
		if _, has := x["data"]; sok && pok && !has {
			data, err := e.loadObject(ctx, store, path, workflowID, runID, false)
			if err != nil {
				return err
			}
			x["data"] = data
			if !keepRef {
				delete(x, "extStoreId")
				delete(x, "extPath")
			}
			return nil
		}
		for _, c := range x {
			if err := e.inlineJSON(ctx, keepRef, workflowID, runID, c); err != nil {
				return err
			}
		}
	case []any:
		for _, c := range x {
			if err := e.inlineJSON(ctx, keepRef, workflowID, runID, c); err != nil {
				return err
			}
		}
	}
	return nil
}

// inlineRaw is inlineJSON for a stored JSON document; it returns raw
// itself when it refers to no external object.
func (e *Engine) inlineRaw(ctx context.Context, keepRef bool, workflowID, runID string, raw []byte) ([]byte, error) {
	if !e.payloadsOn() || !bytes.Contains(raw, []byte(`"extPath"`)) {
		return raw, nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return raw, nil // not JSON: shown as it is
	}
	if err := e.inlineJSON(ctx, keepRef, workflowID, runID, v); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// LoadEncodedObject returns an encoded object with its data: one that
// refers to an external object is loaded, with its reference kept
// (POST /api/v1/workflow/encodedobject/load). It answers an invalid
// argument when the reference names no store or no object, and
// CodeUnimplemented when the server has no external store.
func (e *Engine) LoadEncodedObject(ctx context.Context, obj iwfapi.EncodedObject) (iwfapi.EncodedObject, error) {
	if !e.payloadsOn() {
		return iwfapi.EncodedObject{}, Errorf(CodeUnimplemented, "this server has no external storage")
	}
	if obj.Data != nil || (obj.ExtPath == nil && obj.ExtStoreId == nil) {
		return obj, nil
	}
	if obj.ExtPath == nil || obj.ExtStoreId == nil || *obj.ExtPath == "" || *obj.ExtStoreId == "" {
		return iwfapi.EncodedObject{}, Errorf(CodeInvalidArgument, "an encoded object to load needs both extStoreId and extPath")
	}
	if err := checkObjectPath(*obj.ExtPath); err != nil {
		return iwfapi.EncodedObject{}, err
	}
	data, err := e.loadObject(ctx, *obj.ExtStoreId, *obj.ExtPath, "", "", true)
	if err != nil {
		return iwfapi.EncodedObject{}, err
	}
	obj.Data = &data
	return obj, nil
}

// ---- the payload sweep ----

// PayloadSweepStats is what one payload sweep did.
type PayloadSweepStats struct {
	// Expired counts the pending records given up: their transaction did
	// not commit within Config.PayloadGrace.
	Expired int
	// Deleted counts the objects deleted.
	Deleted int
}

// SweepPayloads deletes the external objects no run refers to: those of
// deleted runs, and those written for transactions that never committed,
// once Config.PayloadGrace has passed. Objects are deleted before their
// records, so a sweep that stops half way leaves records that the next
// one takes up again. The engine sweeps by itself every SweepInterval;
// tests call SweepPayloads to sweep at once.
func (e *Engine) SweepPayloads(ctx context.Context) (PayloadSweepStats, error) {
	var st PayloadSweepStats
	if !e.payloadsOn() {
		return st, nil
	}
	before := e.cfg.Clock.Now().Add(-e.cfg.PayloadGrace)
	for {
		var n int
		err := e.storeUpdate(ctx, func(ctx context.Context, tx Tx) error {
			var err error
			n, err = tx.PayloadExpire(ctx, before, payloadSweepBatch)
			return err
		})
		if err != nil {
			return st, err
		}
		st.Expired += n
		if n < payloadSweepBatch {
			break
		}
	}
	stores := e.cfg.Payloads.StoreIDs()
	for {
		var orphans []PayloadRef
		err := e.storeView(ctx, func(ctx context.Context, tx ReadTx) error {
			var err error
			orphans, err = tx.PayloadOrphans(ctx, stores, payloadSweepBatch)
			return err
		})
		if err != nil || len(orphans) == 0 {
			return st, err
		}
		paths := make([]string, 0, len(orphans))
		var failed error
		for _, o := range orphans {
			if err := e.cfg.Payloads.Delete(ctx, o.StoreID, o.Path); err != nil {
				if ctx.Err() != nil {
					return st, ctx.Err()
				}
				e.storageFailed("delete", err, "", "", o.StoreID, o.Path)
				failed = storageError("delete", err)
				break
			}
			e.payloadMetrics.deleted.inc()
			paths = append(paths, o.Path)
		}
		if len(paths) > 0 {
			err = e.storeUpdate(ctx, func(ctx context.Context, tx Tx) error {
				return tx.PayloadForget(ctx, paths)
			})
			if err != nil {
				return st, err
			}
			st.Deleted += len(paths)
		}
		if failed != nil {
			return st, failed
		}
		if len(orphans) < payloadSweepBatch {
			return st, nil
		}
	}
}

// payloadSweeper runs payload sweeps every SweepInterval until ctx ends.
func (e *Engine) payloadSweeper(ctx context.Context) {
	for {
		t := e.cfg.Clock.NewTimer(e.cfg.SweepInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		st, err := e.SweepPayloads(ctx)
		if err != nil && ctx.Err() == nil && !e.storeUnavailable(err, "payload sweep waits") {
			e.log.Warn().Err(err).Msg("payload sweep failed")
		}
		if st.Expired > 0 || st.Deleted > 0 {
			e.log.Info().Int("expired", st.Expired).Int("deleted", st.Deleted).Msg("payload sweep")
		}
	}
}

// validatePayloads checks the external storage settings and fills in
// their defaults.
func (c *Config) validatePayloads() error {
	if c.PayloadThreshold == 0 {
		c.PayloadThreshold = DefaultPayloadThreshold
	}
	if c.PayloadThreshold < 0 {
		return fmt.Errorf("engine: PayloadThreshold must be positive, got %d", c.PayloadThreshold)
	}
	if c.PayloadGrace == 0 {
		c.PayloadGrace = DefaultPayloadGrace
	}
	if c.PayloadGrace < 0 {
		return fmt.Errorf("engine: PayloadGrace must be positive, got %s", c.PayloadGrace)
	}
	return nil
}

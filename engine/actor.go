package engine

import "context"

type actorKey struct{}

// WithActor returns a context carrying who makes the calls made with it:
// a token's name, a client certificate's subject, "anonymous". Stop,
// reset and the external inputs (signals, attribute writes, timer skips,
// config updates) record it in the run's history as the "actor" member of
// their event's data.
func WithActor(ctx context.Context, actor string) context.Context {
	return context.WithValue(ctx, actorKey{}, actor)
}

// ActorOf returns the actor ctx carries, "" if none.
func ActorOf(ctx context.Context) string {
	a, _ := ctx.Value(actorKey{}).(string)
	return a
}

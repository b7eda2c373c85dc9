package channels

import (
	"reflect"
	"testing"
)

func sig(id, ch string) Command { return Command{Kind: Signal, ID: id, Channel: ch} }
func timer(id string) Command   { return Command{Kind: Timer, ID: id} }

func TestValidate(t *testing.T) {
	cases := []struct {
		name string
		req  Request
		ok   bool
	}{
		{"no commands, no type", Request{}, true},
		{"commands without type", Request{Commands: []Command{timer("t")}}, false},
		{"unknown type", Request{Commands: []Command{timer("t")}, WaitingType: "SOME"}, false},
		{"all", Request{Commands: []Command{timer("")}, WaitingType: AllCompleted}, true},
		{"combination without id", Request{Commands: []Command{timer("")}, WaitingType: AnyCombinationCompleted, Combinations: [][]string{{""}}}, false},
		{"combination without combinations", Request{Commands: []Command{timer("t")}, WaitingType: AnyCombinationCompleted}, false},
		{"combination with unknown id", Request{Commands: []Command{timer("t")}, WaitingType: AnyCombinationCompleted, Combinations: [][]string{{"x"}}}, false},
		{"combination valid", Request{Commands: []Command{timer("t"), sig("s", "c")}, WaitingType: AnyCombinationCompleted, Combinations: [][]string{{"t", "s"}}}, true},
	}
	for _, c := range cases {
		err := c.req.Validate()
		if (err == nil) != c.ok {
			t.Errorf("%s: Validate() = %v, want ok=%v", c.name, err, c.ok)
		}
	}
}

func TestSatisfied(t *testing.T) {
	cmds := []Command{timer("t1"), sig("s1", "a"), sig("s1", "a")}
	all := Request{Commands: cmds, WaitingType: AllCompleted}
	anyReq := Request{Commands: cmds, WaitingType: AnyCompleted}
	combo := Request{Commands: cmds, WaitingType: AnyCombinationCompleted, Combinations: [][]string{{"t1", "s1", "s1"}}}
	cases := []struct {
		req  Request
		done []bool
		want bool
	}{
		{all, []bool{true, true, false}, false},
		{all, []bool{true, true, true}, true},
		{anyReq, []bool{false, false, false}, false},
		{anyReq, []bool{false, false, true}, true},
		{combo, []bool{true, true, false}, false}, // needs s1 twice
		{combo, []bool{true, true, true}, true},
		{combo, []bool{false, true, true}, false},
		{Request{}, nil, true},
	}
	for i, c := range cases {
		if got := c.req.Satisfied(c.done); got != c.want {
			t.Errorf("case %d: Satisfied(%v) = %v, want %v", i, c.done, got, c.want)
		}
	}
}

func TestPlanServesCommandsInOrder(t *testing.T) {
	// Four commands on one channel and four messages: message k goes to command k.
	req := Request{WaitingType: AllCompleted, Commands: []Command{sig("a", "c"), sig("b", "c"), sig("c", "c"), sig("d", "c")}}
	done := make([]bool, 4)
	key := ChannelKey{Signal, "c"}
	got := req.Plan(done, map[ChannelKey]int{key: 4})
	want := []Consumption{{0, key, 0}, {1, key, 1}, {2, key, 2}, {3, key, 3}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Plan = %v, want %v", got, want)
	}
}

func TestPlanPartialThenMore(t *testing.T) {
	req := Request{WaitingType: AllCompleted, Commands: []Command{sig("a", "c"), sig("b", "c")}}
	done := make([]bool, 2)
	key := ChannelKey{Signal, "c"}
	if got := req.Plan(done, map[ChannelKey]int{key: 1}); len(got) != 1 || got[0].Command != 0 {
		t.Fatalf("first Plan = %v", got)
	}
	if got := req.Plan(done, map[ChannelKey]int{key: 1}); len(got) != 1 || got[0].Command != 1 || got[0].N != 0 {
		t.Fatalf("second Plan = %v", got)
	}
	if !req.Satisfied(done) {
		t.Fatal("not satisfied after both messages")
	}
}

func TestPlanAnyStopsAtFirstAndAbandonsRest(t *testing.T) {
	// ANY over two channels, both have messages: only the first command consumes.
	req := Request{WaitingType: AnyCompleted, Commands: []Command{sig("x", "a"), sig("y", "b")}}
	done := make([]bool, 2)
	got := req.Plan(done, map[ChannelKey]int{{Signal, "a"}: 1, {Signal, "b"}: 1})
	if len(got) != 1 || got[0].Command != 0 {
		t.Fatalf("Plan = %v, want only command 0", got)
	}
	if done[1] {
		t.Fatal("abandoned command marked completed")
	}
	// Satisfied requests consume nothing more.
	if got := req.Plan(done, map[ChannelKey]int{{Signal, "b"}: 5}); got != nil {
		t.Fatalf("Plan after satisfied = %v", got)
	}
}

func TestPlanSeparatesSignalAndInternalNamespaces(t *testing.T) {
	req := Request{WaitingType: AllCompleted, Commands: []Command{sig("s", "same"), {Kind: Internal, ID: "i", Channel: "same"}}}
	done := make([]bool, 2)
	got := req.Plan(done, map[ChannelKey]int{{Internal, "same"}: 1})
	if len(got) != 1 || got[0].Command != 1 {
		t.Fatalf("Plan = %v, want only the internal command", got)
	}
}

func TestPlanCombination(t *testing.T) {
	req := Request{
		WaitingType:  AnyCombinationCompleted,
		Commands:     []Command{sig("s1", "a"), sig("s1", "a"), sig("s2", "b")},
		Combinations: [][]string{{"s1", "s1"}, {"s2"}},
	}
	done := make([]bool, 3)
	// Three messages on a: only two are needed; none on b.
	got := req.Plan(done, map[ChannelKey]int{{Signal, "a"}: 3})
	if len(got) != 2 || !req.Satisfied(done) {
		t.Fatalf("Plan = %v, done = %v", got, done)
	}
}

func TestChannels(t *testing.T) {
	req := Request{Commands: []Command{timer("t"), sig("a", "x"), sig("b", "x"), {Kind: Internal, Channel: "y"}}}
	got := req.Channels([]bool{false, true, false, false})
	want := []ChannelKey{{Signal, "x"}, {Internal, "y"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Channels = %v, want %v", got, want)
	}
}

func TestPlanAllMatchesTheWholeBuffer(t *testing.T) {
	// At registration, commands on channels 1, 1, 2, 3 under a combination
	// that [1, 1] already satisfies: the buffered messages of 3 and 2 are
	// consumed too, and the third message of channel 1 stays buffered.
	req := Request{WaitingType: AnyCombinationCompleted,
		Commands:     []Command{sig("c1", "1"), sig("c1", "1"), sig("c2", "2"), sig("c3", "3")},
		Combinations: [][]string{{"c1", "c1"}, {"c2", "c3"}}}
	done := make([]bool, 4)
	one, two, three := ChannelKey{Signal, "1"}, ChannelKey{Signal, "2"}, ChannelKey{Signal, "3"}
	got := req.PlanAll(done, map[ChannelKey]int{one: 3, two: 1, three: 1})
	want := []Consumption{{0, one, 0}, {1, one, 1}, {2, two, 0}, {3, three, 0}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("PlanAll = %v, want %v", got, want)
	}
	if !reflect.DeepEqual(done, []bool{true, true, true, true}) {
		t.Fatalf("completed = %v", done)
	}
	// Plan, for messages arriving later, stops at the condition.
	done = make([]bool, 4)
	if got := req.Plan(done, map[ChannelKey]int{one: 3, two: 1, three: 1}); len(got) != 2 {
		t.Fatalf("Plan consumed %v, want the two messages of channel 1 only", got)
	}
}

package engine

// Limits on what one request, or one worker answer, can make the server
// store or return. Each is checked before anything is written: a request
// over a limit is answered 400 with a message that names the limit, and a
// worker answer over a limit fails its state as any invalid answer does.
// docs/search.md lists them with the search language's own limits.
const (
	// MaxPageSize is the largest page a search or a history request
	// returns. A larger pageSize is lowered to it, as iWF's visibility
	// store (Temporal's) does: the response carries a nextPageToken (or
	// hasMore), so clients that page go on working.
	MaxPageSize = 1000
	// MaxSearchAttributesPerRun bounds the search attribute keys of one
	// run: the keys of a start request, of a searchattributes/set request
	// together with the keys the run already has, and of one worker answer.
	MaxSearchAttributesPerRun = 100
	// MaxTextWords bounds the distinct words of one TEXT search attribute
	// value (each word is a row of the word index; search.Words).
	MaxTextWords = 1000
	// MaxKeywordArrayElements bounds the elements of one KEYWORD_ARRAY
	// search attribute value (each element is a row of the element index).
	MaxKeywordArrayElements = 1000
)

// pageSize returns the page size a request asks for: def when it asks for
// none (absent or not positive), MaxPageSize when it asks for more.
func pageSize(requested *int32, def int) int {
	n := int(deref(requested))
	switch {
	case n <= 0:
		return def
	case n > MaxPageSize:
		return MaxPageSize
	}
	return n
}

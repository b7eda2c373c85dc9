package record

// Input is one input that reached a run from outside: an API call or the
// mutations of an RPC answer. It is stored as the Data of an ExternalInput
// history event, so that a reset can apply it again to a new run. Exactly
// one of the inputs is set; Actor says who sent it, when known.
type Input struct {
	Signal    *SignalInput    `json:"signal,omitempty"`
	Publish   *PublishInput   `json:"publish,omitempty"`
	SetData   *SetDataInput   `json:"setDataAttributes,omitempty"`
	SetSearch *SetSearchInput `json:"setSearchAttributes,omitempty"`
	SkipTimer *SkipTimer      `json:"skipTimer,omitempty"`
	Config    *ConfigInput    `json:"configUpdate,omitempty"`
	RPC       *RPCMutation    `json:"rpc,omitempty"`
	// Actor is who made the call (engine.WithActor): a token's name, a
	// client certificate's subject, "anonymous".
	Actor string `json:"actor,omitempty"`
}

// SignalInput is a message sent to a signal channel.
type SignalInput struct {
	SignalChannelName string `json:"signalChannelName"`
	SignalValue       *Value `json:"signalValue,omitempty"`
}

// PublishInput publishes messages to internal channels.
type PublishInput struct {
	Messages *[]Publish `json:"messages,omitempty"`
}

// SetDataInput writes data attributes.
type SetDataInput struct {
	Objects *[]KeyValue `json:"objects,omitempty"`
}

// SetSearchInput writes search attributes.
type SetSearchInput struct {
	SearchAttributes *[]SearchAttribute `json:"searchAttributes,omitempty"`
}

// ConfigInput overwrites fields of a run's workflow config.
type ConfigInput struct {
	WorkflowConfig Config `json:"workflowConfig"`
}

// RPCMutation is what an RPC answer changes in a run.
type RPCMutation struct {
	Name                   string             `json:"rpcName"`
	Locking                bool               `json:"locking,omitempty"`
	UpsertSearchAttributes *[]SearchAttribute `json:"upsertSearchAttributes,omitempty"`
	UpsertDataAttributes   *[]KeyValue        `json:"upsertDataAttributes,omitempty"`
	Publish                *[]Publish         `json:"publishToInterStateChannel,omitempty"`
	Decision               *Decision          `json:"stateDecision,omitempty"`
}

// Package asynqtasks is what asynqworker and asynqproducer agree on: the bench's two Asynq task
// types and the payload of the latency one, so that the worker reads what the producer wrote.
package asynqtasks

import "encoding/json"

const (
	// Noop is the no-op task of the drain and enqueue rows; its payload is empty.
	Noop = "noop"
	// Elapsed is the start-latency task: its handler RPUSHes to Key the seconds from Since to its start.
	Elapsed = "elapsed"
)

// ElapsedPayload is an Elapsed task's payload, as JSON: the list to push to, and the Unix time
// (seconds) the producer was asked to enqueue it at.
type ElapsedPayload struct {
	Key   string  `json:"key"`
	Since float64 `json:"since"`
}

// Encode is the payload as the task carries it.
func (p ElapsedPayload) Encode() []byte {
	data, err := json.Marshal(p)
	if err != nil {
		panic("asynqtasks: a struct of a string and a float always encodes: " + err.Error())
	}
	return data
}

// DecodeElapsed reads an Elapsed task's payload.
func DecodeElapsed(data []byte) (ElapsedPayload, error) {
	var p ElapsedPayload
	err := json.Unmarshal(data, &p)
	return p, err
}

package delayed

// blobWithOptions is blob, either kind of task, with its options map replaced by o's: what a producer
// writes to track a task or hold its unique lock, and what a sweeper writes to count a crash. The call
// is kept as its bytes were (nothing of the arguments is decoded, so nothing is lost); the result
// takes the form a blob with options has (see task.go): [func_path, payload_bin, options] for a
// GoTask (go-delayed's nil payload becomes the bin of msgpack nil), Python's five elements
// [func_path, args, kwargs, retry, options] for a PyTask (missing ones nil, nil and 0). o must carry
// something (o.carried()).
func blobWithOptions(blob []byte, o TaskOptions) ([]byte, error) {
	task, err := decodeTask(blob)
	if err != nil {
		return nil, err
	}
	r := &reader{data: blob}
	_, n, _ := r.header()
	funcPath, _ := r.skip()
	out := append(make([]byte, 0, len(blob)+64), pyWithOptions)
	if _, isGo := task.(*GoTask); isGo {
		out[0] = goWithOptions
		payload, _ := r.skip()
		if payload[0] == 0xc0 {
			payload = appendHeader(nil, 'b', len(noArgument))
			payload = append(payload, noArgument...)
		}
		out = append(append(out, funcPath...), payload...)
		return o.appendWireMap(out)
	}
	out = append(out, funcPath...)
	for i, missing := range []byte{0xc0, 0xc0, 0x00} { // args, kwargs, retry
		if i+1 < n {
			element, _ := r.skip()
			out = append(out, element...)
		} else {
			out = append(out, missing)
		}
	}
	return o.appendWireMap(out)
}

// optionsOf is a task's options.
func optionsOf(task Task) TaskOptions {
	switch t := task.(type) {
	case *GoTask:
		return t.Options()
	case *PyTask:
		return t.Options()
	}
	return TaskOptions{}
}

// withOptions is task with options set (GoTask.With, PyTask.With): they win over its own.
func withOptions(task Task, options []TaskOption) Task {
	if len(options) == 0 {
		return task
	}
	switch t := task.(type) {
	case *GoTask:
		return t.With(options...)
	case *PyTask:
		return t.With(options...)
	}
	return task
}

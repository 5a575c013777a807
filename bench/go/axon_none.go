//go:build !axon

// Built without AxonCache (no -tags axon): the axon system is refused.

package main

import "errors"

const haveAxon = false

func axonSystem(int, string) (system, error) {
	return system{}, errors.New("built without AxonCache (build.sh with AXONCACHE set builds it in)")
}

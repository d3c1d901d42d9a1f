// Package faketime runs redis-server on a fake wall clock through
// libfaketime: where to find the library, the environment that preloads it,
// and a check of the FAKETIME specs a clock-skew fault takes.
package faketime

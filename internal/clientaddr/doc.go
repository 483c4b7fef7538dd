// Package clientaddr finds the client of a request: the connecting peer,
// or behind trusted proxies the first untrusted entry of the forwarding
// header read right to left (X-Forwarded-For, RFC 7239 Forwarded, or a
// single-address header). Garbage on that walk makes the client unknown.
// Addresses are normalised once: unmapped, zone dropped, and an IPv4 host
// embedded in 6to4, NAT64 or Teredo taken as itself.
package clientaddr

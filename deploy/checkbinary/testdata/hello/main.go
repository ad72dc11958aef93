// Command hello is the smallest Go program, built by checkbinary's tests with various flags.
package main

func main() { println("hello") }

// printversion prints buildinfo.Read().String(); buildinfo's tests build it
// with -ldflags -X to check the stamping end to end.
package main

import (
	"fmt"

	"github.com/hookroom/hookroom/internal/buildinfo"
)

func main() {
	fmt.Println(buildinfo.Read())
}

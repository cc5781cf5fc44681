/* The library's version at run time, from the header it was built with. */
#include "weft.h"

const char *wf_version(void) { return WF_VERSION_STRING; }

int wf_version_number(void) { return WF_VERSION_NUMBER; }

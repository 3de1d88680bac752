/* impl.c - the one translation unit of the examples that compiles the attnkit headers'
   implementations (each header's X_IMPLEMENTATION), so every program in examples/ links
   them once. Tests link it (the Makefile's TEST_OBJS_<test>: build/<cc>/common/impl.o) or,
   one translation unit, include this file directly. */
#define TENSOR_IMPLEMENTATION
#include "tensor.h"
#define ERA_IMPLEMENTATION
#include "era.h"
#define POLAR_IMPLEMENTATION
#include "polar.h"
#define GDELTA_IMPLEMENTATION
#include "gdelta.h"
#define GUARDIAN_IMPLEMENTATION
#include "guardian.h"
#define CEAS_IMPLEMENTATION
#include "ceas.h"

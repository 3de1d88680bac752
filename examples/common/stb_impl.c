/* The one translation unit of the examples that compiles the stb implementations
   (attnkit headers never define STB_*_IMPLEMENTATION themselves). */
#define STB_DS_IMPLEMENTATION
#include <stb_ds.h>
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb_image_write.h>

// Not a test_modeling_*.cpp file: the scanner does not read it.
TRACETORCH_COMMON_MODEL_TESTS(NotAModelTester);

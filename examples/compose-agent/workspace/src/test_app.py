import unittest

from app import greet


class GreetTest(unittest.TestCase):
    def test_greet(self) -> None:
        self.assertEqual(greet("hookcage"), "Hello, hookcage")


if __name__ == "__main__":
    unittest.main()
